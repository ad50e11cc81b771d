"""The per-question codebook: HDBSCAN (the hdbscan package) agrees with scikit-learn's at
epsilon 0; identical texts share a concept; noise handling; medoid labels."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from sklearn.cluster import HDBSCAN as SkHDBSCAN

from lmaudit.studies.choir.codebook import _distances, build_codebook


def _blobs(seed: int, k: int = 4, per: int = 12, dim: int = 16) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((k, dim))
    x = np.concatenate([c + 0.08 * rng.standard_normal((per, dim)) for c in centers])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    texts = [f"c{i // per}-{i}" for i in range(len(x))]
    return texts, x.astype(np.float32)


def _partition(labels: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(labels == lab).tolist()) for lab in set(labels.tolist()) if lab >= 0}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clusters_agree_with_scikit_learn_at_epsilon_zero(seed):
    from hdbscan import HDBSCAN

    texts, x = _blobs(seed)
    d = _distances(x, "cosine")
    ours = HDBSCAN(min_cluster_size=5, metric="precomputed").fit_predict(d)
    theirs = SkHDBSCAN(min_cluster_size=5, metric="precomputed", copy=True).fit_predict(d)
    assert _partition(ours) == _partition(theirs)
    cb = build_codebook(texts, x, min_cluster_size=5, epsilon=0.0)
    assert len(cb.clustered) == 4 and cb.n_noise == 0


def test_identical_texts_share_a_concept_and_labels_are_medoids():
    texts, x = _blobs(3)
    texts = texts + texts[:6]  # the first six items written again
    x = np.concatenate([x, x[:6]])
    cb = build_codebook(texts, x, min_cluster_size=5, epsilon=0.3)
    assert {cb.concept_of[t] for t in texts[:6]} == {cb.concept_of[texts[0]]}
    for c, label in cb.labels.items():
        assert cb.concept_of[label] == c  # the label is one of the concept's own texts
    assert sum(cb.sizes.values()) == len(texts)


def test_noise_becomes_singletons_or_is_dropped():
    texts, x = _blobs(4, k=2)
    rng = np.random.default_rng(9)
    stray = rng.standard_normal((3, x.shape[1]))
    stray /= np.linalg.norm(stray, axis=1, keepdims=True)
    texts, x = [*texts, "s1", "s2", "s3"], np.concatenate([x, stray.astype(np.float32)])
    single = build_codebook(texts, x, min_cluster_size=5, epsilon=0.0, noise="singleton")
    drop = build_codebook(texts, x, min_cluster_size=5, epsilon=0.0, noise="drop")
    noise = {t for t in texts if single.concept_of[t] not in single.clustered}
    assert noise and noise <= {"s1", "s2", "s3"}  # the blobs cluster; only strays are noise
    assert single.n_noise == drop.n_noise == len(noise)
    assert set(drop.concept_of) == set(texts) - noise
    assert len(single.labels) == len(single.clustered) + len(noise)
    with pytest.raises(ValueError, match="noise handling"):
        build_codebook(texts, x, min_cluster_size=5, epsilon=0.0, noise="keep")


def _repeated(seed: int) -> tuple[list[str], np.ndarray]:
    """40 distinct texts around 6 topics, some written 30 or 60 times (models repeat their
    defaults), the rest 1-3 times; occurrences grouped by text."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((6, 32))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    texts, vecs = [], []
    for k in range(40):
        v = centres[rng.integers(0, 6)] + rng.normal(scale=rng.uniform(0.15, 0.6), size=32)
        v /= np.linalg.norm(v)
        reps = int(rng.choice([1, 1, 2, 3, 30, 60])) if k % 3 == 0 else int(rng.choice([1, 2, 3]))
        texts += [f"t{k}"] * reps
        vecs += [v] * reps
    return texts, np.array(vecs, dtype=np.float32)


@pytest.mark.parametrize("seed", range(6))
def test_every_occurrence_is_a_point_as_in_hdbscan_over_all_items(seed):
    """The seed clusters every extracted item: the codebook's partition of the texts is that of
    HDBSCAN run directly on all occurrences (copies of a text at distance 0), a text taking the
    label most of its copies got. Capping the copies at min_cluster_size changed it in most of
    these seeds."""
    from hdbscan import HDBSCAN

    texts, x = _repeated(seed)
    xd = x.astype(np.float64)
    d = np.maximum(1.0 - np.clip(xd @ xd.T, -1.0, 1.0), 0.0)
    same = np.array([[a == b for b in texts] for a in texts])
    d[same] = 0.0
    labels = HDBSCAN(min_cluster_size=5, cluster_selection_epsilon=0.3, metric="precomputed").fit_predict(d)
    want: dict[int, set[str]] = {}
    for t in dict.fromkeys(texts):
        mine = labels[[i for i, u in enumerate(texts) if u == t]]
        good = mine[mine >= 0]
        if 2 * good.size > mine.size:
            want.setdefault(int(np.bincount(good).argmax()), set()).add(t)
    cb = build_codebook(texts, x, min_cluster_size=5, epsilon=0.3, metric="cosine")
    got: dict[int, set[str]] = {}
    for t, c in cb.concept_of.items():
        if c in cb.clustered:
            got.setdefault(c, set()).add(t)
    assert sorted(map(sorted, got.values())) == sorted(map(sorted, want.values()))
    assert cb.n_items == len(texts)


_GRAM_DIGEST = """
import hashlib, sys
import numpy as np
from lmaudit.studies.choir.codebook import _unit_gram
rng = np.random.default_rng(0)
x = rng.standard_normal((300, 256))
x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
x64 = x.astype(np.float64)
print(hashlib.sha256(_unit_gram(x).tobytes()).hexdigest(), hashlib.sha256((x64 @ x64.T).tobytes()).hexdigest())
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="OpenBLAS x86 kernel names")
def test_distances_are_the_same_bits_whatever_blas_kernel_computes_them():
    """The codebook's dot products do not depend on the BLAS kernel the processor selects: the
    same in processes running OpenBLAS's Haswell (AVX2, FMA) and Katmai (SSE) kernels, where a
    plain float64 product differs between the two (the choir_sim run's partition did, between
    an AVX2 and an AVX-512 host)."""
    digests = {}
    for kernel in ("Haswell", "Katmai"):
        env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
        out = subprocess.run(
            [sys.executable, "-c", _GRAM_DIGEST], env=env, capture_output=True, text=True, check=True
        )
        digests[kernel] = out.stdout.split()
    exact, plain = zip(*digests.values(), strict=True)
    assert exact[0] == exact[1]
    if plain[0] == plain[1]:  # then the check above shows nothing about kernels
        pytest.skip("the two kernels give a plain product the same bits on this machine")


@pytest.mark.parametrize("dim", [2, 16, 384, 3072])
def test_unit_gram_equals_the_exactly_summed_dot_products(dim):
    """Against each dot product summed exactly (math.fsum of the float32 values' products, exact
    in float64): within 1e-12 (what the split keeps: 2**-42 per coordinate)."""
    import math

    from lmaudit.studies.choir.codebook import _unit_gram

    rng = np.random.default_rng(dim)
    x = rng.standard_normal((12, dim))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = np.array([[math.fsum(u * v) for v in x64] for u in x64])
    assert float(np.abs(_unit_gram(x) - ref).max()) < 1e-12
