"""The per-question codebook: HDBSCAN over the embeddings of every extracted item of the question
(all members and conditions), cluster labels = medoid text.

Every item occurrence is a point, as the seed clusters every extracted item (a text written
often is dense, and how many copies it has weighs in HDBSCAN's cluster stability, so copies
are not capped: capping them at ``min_cluster_size`` changed the partition). The points are
clustered by HDBSCAN (``min_cluster_size``, ``cluster_selection_epsilon``, ``metric="precomputed"``) over the
pairwise distance of unit embeddings (cosine: ``1 - u.v``; euclidean: ``|u - v|``). The
implementation is the ``hdbscan`` package (scikit-learn-contrib), from which scikit-learn's
``HDBSCAN`` was ported: scikit-learn's raises a TypeError whenever
``cluster_selection_epsilon > 0`` under NumPy 2 (its issue #33219, unfixed in the installed
release); with ``epsilon = 0`` the two agree (a test checks it).
Identical texts always share a concept. HDBSCAN's noise items (label -1) become one concept per
distinct text (``noise=singleton``) or are left out of every list (``noise=drop``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["Codebook", "build_codebook"]


@dataclass(frozen=True)
class Codebook:
    concept_of: dict[str, int]  # item text -> concept id (absent: dropped noise)
    labels: dict[int, str]  # concept id -> label (medoid text)
    sizes: dict[int, int]  # concept id -> occurrences
    clustered: frozenset[int]  # concept ids that are HDBSCAN clusters (not noise singletons)
    n_items: int
    n_noise: int


def _unit_gram(x: NDArray[np.float32]) -> NDArray[np.float64]:
    """The dot products of the rows of ``x`` (unit vectors), bitwise the same on every machine.

    A BLAS product's last bits depend on the kernel the library picks for the processor (its
    summation order), and HDBSCAN and the medoids turn last bits into other partitions wherever
    distances tie, as the ``sim`` embedder's bag-of-words vectors do all the time (seen: the
    ``choir_sim`` run's codebooks on an AVX2 host against an AVX-512 one). So each coordinate is
    written as ``hi + lo * 2**-b`` (integers ``hi``, ``lo`` of at most ``b`` bits; what the
    float32 value holds beyond ``2**-2b`` is dropped, ``2b`` >= 42) and the products of the
    integer matrices are computed by BLAS: their every partial sum is an integer below
    ``2**53``, so exact in any order. Combining the three products is element-wise."""
    x64 = np.clip(x.astype(np.float64), -1.0, 1.0)
    dim = max(int(x64.shape[1]), 1)
    b = (51 - (dim - 1).bit_length()) // 2  # dim * 2**(2b) <= 2**51: every partial sum exact
    scale = float(2**b)
    hi = np.rint(x64 * scale)
    lo = np.rint((x64 * scale - hi) * scale)  # x * scale - hi is exact (|.| <= 1/2)
    cross = hi @ lo.T
    return (hi @ hi.T) / scale**2 + ((cross + cross.T) + (lo @ lo.T) / scale) / scale**3


def _distances(x: NDArray[np.float32], metric: str) -> NDArray[np.float64]:
    sim = np.clip(_unit_gram(x), -1.0, 1.0)
    if metric == "cosine":
        d = 1.0 - sim
    elif metric == "euclidean":
        d = np.sqrt(np.maximum(2.0 - 2.0 * sim, 0.0))
    else:
        raise ValueError(f"codebook metric {metric!r} is not cosine or euclidean")
    np.fill_diagonal(d, 0.0)
    return np.maximum(d, 0.0)


def _weighted_sums(d: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """``d @ w``, summed left to right (a running sum: the same bits on every machine, where a
    BLAS product's summation order depends on the processor)."""
    if d.shape[1] == 0:
        return np.zeros(d.shape[0])
    return np.cumsum(d * w[None, :], axis=1)[:, -1]


def build_codebook(
    texts: list[str],
    vectors: NDArray[np.float32],
    *,
    min_cluster_size: int,
    epsilon: float,
    metric: str = "cosine",
    noise: str = "singleton",
) -> Codebook:
    """``texts``: every item occurrence of one question; ``vectors``: their unit embeddings."""
    from hdbscan import HDBSCAN

    if noise not in ("singleton", "drop"):
        raise ValueError(f"codebook noise handling {noise!r} is not singleton or drop")
    n = len(texts)
    index: dict[str, int] = {}
    first: list[int] = []
    for i, t in enumerate(texts):
        if t not in index:
            index[t] = len(first)
            first.append(i)
    uniq = [texts[i] for i in first]
    occ = np.array([index[t] for t in texts], dtype=np.int64)
    counts = np.bincount(occ, minlength=len(uniq)) if n else np.zeros(0, dtype=np.int64)
    d = _distances(vectors[first], metric) if n else np.zeros((0, 0))
    point_text = np.repeat(np.arange(len(uniq)), counts)  # every occurrence, grouped by text
    text_label = np.full(len(uniq), -1)
    if point_text.size >= max(2, min_cluster_size):
        labels = HDBSCAN(
            min_cluster_size=min_cluster_size,
            cluster_selection_epsilon=epsilon,
            metric="precomputed",
        ).fit_predict(d[np.ix_(point_text, point_text)])
        for u in range(len(uniq)):  # a text's copies are one point in space: one label (majority)
            ls = labels[point_text == u]
            ls = ls[ls >= 0]
            if ls.size * 2 > (point_text == u).sum():
                vals, c = np.unique(ls, return_counts=True)
                text_label[u] = vals[np.argmax(c)]
    concept_of: dict[str, int] = {}
    labels_out: dict[int, str] = {}
    sizes: dict[int, int] = {}
    clustered: set[int] = set()
    next_id = 0
    for cl in sorted({int(x) for x in text_label if x >= 0}):
        members = np.flatnonzero(text_label == cl)
        w = counts[members].astype(np.float64)  # the medoid minimises the occurrence-weighted distance
        medoid = members[int(np.argmin(_weighted_sums(d[np.ix_(members, members)], w)))]
        for m_ in members:
            concept_of[uniq[int(m_)]] = next_id
        labels_out[next_id] = uniq[int(medoid)]
        sizes[next_id] = int(w.sum())
        clustered.add(next_id)
        next_id += 1
    n_noise = 0
    for u in range(len(uniq)):
        if text_label[u] >= 0:
            continue
        count = int(counts[u])
        n_noise += count
        if noise == "singleton":
            concept_of[uniq[u]] = next_id
            labels_out[next_id] = uniq[u]
            sizes[next_id] = count
            next_id += 1
    return Codebook(concept_of, labels_out, sizes, frozenset(clustered), n, n_noise)
