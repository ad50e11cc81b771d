"""The per-question codebook: HDBSCAN (the hdbscan package) agrees with scikit-learn's at
epsilon 0; identical texts share a concept; noise handling; medoid labels; every occurrence a
point; concepts numbered by first appearance."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import HDBSCAN as SkHDBSCAN

from lmaudit.studies.choir.codebook import _distances, _medoid, build_codebook
from lmaudit.studies.choir.ties import tie_broken_reachability


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


def _text_partition(labels: np.ndarray, texts: list[str]) -> list[list[str]]:
    """The texts grouped by the label most of their copies got (a text whose copies are mostly
    noise is left out)."""
    groups: dict[int, list[str]] = {}
    for t in dict.fromkeys(texts):
        mine = labels[[i for i, u in enumerate(texts) if u == t]]
        good = mine[mine >= 0]
        if 2 * good.size > mine.size:
            groups.setdefault(int(np.bincount(good).argmax()), []).append(t)
    return sorted(map(sorted, groups.values()))


def _clusters(cb) -> list[list[str]]:
    got: dict[int, list[str]] = {}
    for t, c in cb.concept_of.items():
        if c in cb.clustered:
            got.setdefault(c, []).append(t)
    return sorted(map(sorted, got.values()))


def test_every_occurrence_is_a_point():
    """The seed clusters every extracted item: the codebook's partition of the texts is that of
    HDBSCAN run on all occurrences (each copy its own row, the distance matrix of all of them,
    ties broken by point order), a text taking the label most of its copies got. Capping the
    copies at min_cluster_size gives other partitions (in some of these seeds)."""
    from hdbscan import HDBSCAN

    capped_differs = 0
    for seed in range(6):
        texts, x = _repeated(seed)
        reach = tie_broken_reachability(_distances(x, "cosine"), 5)
        labels = HDBSCAN(
            min_cluster_size=5, min_samples=1, cluster_selection_epsilon=0.3, metric="precomputed"
        ).fit_predict(reach)
        cb = build_codebook(texts, x, min_cluster_size=5, epsilon=0.3, metric="cosine")
        assert _clusters(cb) == _text_partition(labels, texts)
        assert cb.n_items == len(texts)
        keep = [i for i, t in enumerate(texts) if texts[: i + 1].count(t) <= 5]
        capped = build_codebook([texts[i] for i in keep], x[keep], min_cluster_size=5, epsilon=0.3)
        capped_differs += _clusters(capped) != _clusters(cb)
    assert capped_differs >= 1


def test_concepts_are_numbered_by_first_appearance():
    """Concept ids, clusters and noise singletons alike, are 0, 1, 2, ... in the order in which
    their first text appears (HDBSCAN's own label numbers follow its tree; the old ids put every
    cluster before every singleton)."""
    texts, x = _blobs(4, k=2)
    rng = np.random.default_rng(9)
    stray = rng.standard_normal((3, x.shape[1]))
    stray /= np.linalg.norm(stray, axis=1, keepdims=True)
    order = [24, 0, 25, 12, *range(1, 12), *range(13, 24), 26]  # a stray first
    texts = [[*texts, "s1", "s2", "s3"][i] for i in order]
    x = np.concatenate([x, stray.astype(np.float32)])[order]
    cb = build_codebook(texts, x, min_cluster_size=5, epsilon=0.0)
    firsts = list(dict.fromkeys(cb.concept_of[t] for t in texts))
    assert firsts == list(range(len(cb.labels)))
    assert cb.concept_of["s1"] == 0 and cb.concept_of["s1"] not in cb.clustered


def test_the_medoid_minimises_the_weighted_distance_sum_and_a_tie_goes_to_the_first():
    d = np.array([[0.0, 0.5, 0.25], [0.5, 0.0, 0.25], [0.25, 0.25, 0.0]])
    members = np.arange(3)
    assert _medoid(d, members, np.array([1, 1, 1])) == 2  # 0.5 against 0.75 and 0.75
    assert _medoid(d, members, np.array([1, 1, 9])) == 2
    assert _medoid(d, members, np.array([3, 3, 0])) == 0  # 1.5 and 1.5: the first
    assert _medoid(d, members[1:], np.array([1, 1])) == 1  # 0.25 each: the first member
