"""The per-question codebook: HDBSCAN (the hdbscan package) agrees with scikit-learn's at
epsilon 0; identical texts share a concept; noise handling; medoid labels."""

from __future__ import annotations

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
