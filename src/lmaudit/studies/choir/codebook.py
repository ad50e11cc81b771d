"""The per-question codebook: HDBSCAN over the embeddings of every extracted item of the question
(all members and conditions), cluster labels = medoid text.

Every item occurrence is a point, as the seed clusters every extracted item (a text written
often is dense, and how many copies it has weighs in HDBSCAN's cluster stability, so copies
are not capped: capping them at ``min_cluster_size`` changed the partition). The points are
clustered by HDBSCAN (``min_cluster_size``, ``cluster_selection_epsilon``) over the pairwise
distance of unit embeddings (cosine: ``1 - u.v``; euclidean: ``|u - v|``). The implementation
is the ``hdbscan`` package (scikit-learn-contrib), from which scikit-learn's ``HDBSCAN`` was
ported: scikit-learn's raises a TypeError whenever ``cluster_selection_epsilon > 0`` under
NumPy 2 (its issue #33219, unfixed in the installed release); with ``epsilon = 0`` the two
agree (a test checks it). Identical texts always share a concept. HDBSCAN's noise items
(label -1) become one concept per distinct text (``noise=singleton``) or are left out of every
list (``noise=drop``).

The same partition and labels on every processor (:mod:`.ties`): the distances are exact
(:func:`lmaudit.stats.exact.unit_dots`) and rounded to float32; HDBSCAN's tree is built from
mutual reachability distances whose ties are broken by point order before HDBSCAN sees them
(it orders equal edges by NumPy's unstable sort, whose order differs between AVX-512 and AVX2
processors); concepts are numbered by the first appearance of their texts; a medoid's
occurrence-weighted distance sum is exact, ties going to the text seen first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from lmaudit.stats.exact import unit_dots
from lmaudit.studies.choir.ties import canonical_labels, tie_broken_reachability

if TYPE_CHECKING:
    from lmaudit.studies.choir.config import ChoirStudyConfig
    from lmaudit.studies.choir.records import ListRecord

__all__ = ["Codebook", "build_codebook", "coded_codebook"]


@dataclass(frozen=True)
class Codebook:
    concept_of: dict[str, int]  # item text -> concept id (absent: dropped noise)
    labels: dict[int, str]  # concept id -> label (medoid text)
    sizes: dict[int, int]  # concept id -> occurrences
    clustered: frozenset[int]  # concept ids that are HDBSCAN clusters (not noise singletons)
    n_items: int
    n_noise: int
    coded: bool = False  # from the lists' own concept ids (hand coding), not clustered


def _distances(x: NDArray[np.float32], metric: str) -> NDArray[np.float64]:
    """Pairwise distances of unit rows, rounded to float32 (the precision the embeddings hold),
    the same bits on every machine."""
    sim = np.clip(unit_dots(x), -1.0, 1.0)
    if metric == "cosine":
        d = 1.0 - sim
    elif metric == "euclidean":
        d = np.sqrt(np.maximum(2.0 - 2.0 * sim, 0.0))
    else:
        raise ValueError(f"codebook metric {metric!r} is not cosine or euclidean")
    d = np.maximum(d, 0.0).astype(np.float32).astype(np.float64)
    np.fill_diagonal(d, 0.0)
    return d


def _medoid(d: NDArray[np.float64], members: NDArray[np.int64], w: NDArray[np.int64]) -> int:
    """The member with the least occurrence-weighted distance sum (exact: float32 distances
    times counts are exact in float64, and math.fsum rounds their sum once); ties: the first."""
    sums = [math.fsum(row) for row in d[np.ix_(members, members)] * w[None, :].astype(np.float64)]
    return int(members[sums.index(min(sums))])


def _text_labels(point_text: NDArray[np.int64], labels: NDArray[np.int64], n_texts: int) -> NDArray[np.int64]:
    """A text's copies are one point in space: the label most of them got (ties: the label
    seen first), or -1 unless more than half of them are clustered."""
    out = np.full(n_texts, -1, dtype=np.int64)
    for u in range(n_texts):
        mine = labels[point_text == u]
        good = mine[mine >= 0]
        if good.size * 2 > mine.size:
            out[u] = int(np.bincount(good).argmax())  # labels are canonical: ties to the first seen
    return out


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
    text_label = np.full(len(uniq), -1, dtype=np.int64)
    if point_text.size >= max(2, min_cluster_size):
        reach = tie_broken_reachability(d[np.ix_(point_text, point_text)], min_cluster_size)
        # min_samples=1: HDBSCAN's own mutual reachability of ``reach`` is ``reach`` itself
        raw = HDBSCAN(
            min_cluster_size=min_cluster_size,
            min_samples=1,
            cluster_selection_epsilon=epsilon,
            metric="precomputed",
        ).fit_predict(reach)
        text_label = _text_labels(point_text, canonical_labels(raw), len(uniq))
    # concepts (clusters and noise singletons) numbered by the first appearance of a text
    concept_of: dict[str, int] = {}
    labels_out: dict[int, str] = {}
    sizes: dict[int, int] = {}
    clustered: set[int] = set()
    n_noise = 0
    next_id = 0
    seen: dict[int, int] = {}
    for u, text in enumerate(uniq):
        cl = int(text_label[u])
        if cl >= 0:
            if cl not in seen:
                seen[cl] = next_id
                members = np.flatnonzero(text_label == cl)
                labels_out[next_id] = uniq[_medoid(d, members, counts[members])]
                sizes[next_id] = int(counts[members].sum())
                clustered.add(next_id)
                next_id += 1
            concept_of[text] = seen[cl]
            continue
        n_noise += int(counts[u])
        if noise == "singleton":
            concept_of[text] = next_id
            labels_out[next_id] = text
            sizes[next_id] = int(counts[u])
            next_id += 1
    return Codebook(concept_of, labels_out, sizes, frozenset(clustered), n, n_noise)


def coded_codebook(recs: Sequence[ListRecord]) -> Codebook:
    """The codebook the lists' concept ids give (hand coding): each id one concept and one
    cluster (a coder's category, whatever its size), labelled by the id, numbered by the first
    appearance of its items. A text given two ids is refused (a concept is a text's, as in a
    clustered codebook)."""
    code_of: dict[str, str] = {}
    ids: dict[str, int] = {}
    sizes: dict[int, int] = {}
    n = 0
    for r in recs:
        for text, code in zip(r.items, r.concepts or (), strict=True):
            if code_of.setdefault(text, code) != code:
                raise ValueError(
                    f"question {r.question!r}: item {text!r} is coded both {code_of[text]!r} and {code!r}"
                )
            c = ids.setdefault(code, len(ids))
            sizes[c] = sizes.get(c, 0) + 1
            n += 1
    concept_of = {t: ids[c] for t, c in code_of.items()}
    labels = {i: code for code, i in ids.items()}
    return Codebook(concept_of, labels, sizes, frozenset(ids.values()), n, 0, coded=True)


def question_codebook(
    recs: Sequence[ListRecord], vec: Mapping[str, NDArray[np.float32]], s: ChoirStudyConfig
) -> Codebook:
    """The codebook of one question's lists: the lists' own concept ids when every list is
    coded, else every item occurrence, by its embedding in ``vec``, clustered as the study's
    ``codebook`` settings say."""
    if recs and all(r.concepts is not None for r in recs):
        return coded_codebook(recs)
    texts = [t for r in recs for t in r.items]
    return build_codebook(
        texts,
        np.stack([vec[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32),
        min_cluster_size=s.codebook.min_cluster_size,
        epsilon=s.codebook.cluster_selection_epsilon,
        metric=s.codebook.metric,
        noise=s.codebook.noise,
    )
