"""Recoverability: can a cell's label (model, persona) be told from its output profile?

A *cell* is one feature vector (e.g. the mean concept embedding of one model x persona x
question condition). :func:`nearest_centroid_predict` holds each cell out, builds every
class's centroid from the cells that are not held out with it, and predicts the class whose
centroid is most cosine-similar (centroid = mean; cosine to a mean equals cosine to the sum).
Cells that share a ``group`` (e.g. a question) are held out together, so no centroid sees the
held-out question; without groups each cell is held out alone. With ``strata`` (e.g. the
model) a cell is classified only against centroids of its own stratum: the seed's
within-model, leave-one-question-out persona classifier (appendix C) is
``strata=model, groups=question, labels=persona``. A class with no cell left outside the
held-out group is not a candidate for that group; ties go to the class seen first, and scores
within ``1e-9`` of each other are ties (:func:`lmaudit.stats.exact.first_max`: the scores' last
bits follow the processor's BLAS kernel and must not decide a prediction).

:func:`recoverability` adds the accuracy's percentile-bootstrap interval (cells resampled
with replacement) and a label-shuffle null: labels permuted (within ``shuffle_within``
blocks, by default within strata, e.g. the model-preserving persona shuffle), the whole
classification re-run, and the null's mean, central band and upper-tail Monte Carlo p-value
reported. Randomness comes only from ``rng``.

:func:`nearest_cell_recovery` is the seed's *global* classifier (section 4.2, appendix C: "which
full output cell is most similar to each held-out cell"): each cell takes the label of the most
cosine-similar other cell (exact dot products, :func:`lmaudit.stats.exact.unit_dots`; cells tied
within ``1e-9`` share the credit, so no tie and no numbering decides it), with the same
bootstrap and a label-shuffle null within ``shuffle_within`` blocks (which keeps the neighbours
fixed: only labels move).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.stats.arrays import FloatArray, IntArray
from lmaudit.stats.exact import SCORE_TOL, first_max, unit_dots
from lmaudit.stats.intervals import check_alpha
from lmaudit.stats.permutation import label_codes, monte_carlo_pvalue

__all__ = [
    "Recovery",
    "nearest_cell_recovery",
    "nearest_cells",
    "nearest_centroid_predict",
    "recoverability",
    "within_model_persona",
]


def _codes(values: Sequence[Hashable] | None, n: int, what: str) -> tuple[IntArray, tuple[Any, ...]]:
    """One code per cell (:func:`label_codes`); without values, each cell its own code."""
    if values is None:
        return np.arange(n, dtype=np.int64), tuple(range(n))
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} entries for {n} cells")
    return label_codes(values)


def _blocks(values: Sequence[Hashable] | None, n: int, what: str) -> tuple[IntArray, tuple[Any, ...]]:
    """One code per cell of an optional partition (strata, shuffle blocks, ``per``): without
    values, every cell in one unnamed block."""
    if values is None:
        return np.zeros(n, dtype=np.int64), ()
    return _codes(values, n, what)


def _block_means(per_cell: NDArray[Any], codes: IntArray, names: tuple[Any, ...]) -> dict[str, float]:
    """The mean of ``per_cell`` over the cells of each named block, by the block's name."""
    return {str(names[k]): float(per_cell[codes == k].mean()) for k in range(len(names))}


@dataclass(frozen=True)
class _Stratum:
    """What stays fixed while labels are shuffled: the stratum's cells, their groups, and each
    group's Gram matrix (dot products of the cells held out together, zero-padded to the
    largest group)."""

    idx: IntArray
    x: FloatArray  # the stratum's cells
    group: IntArray
    n_groups: int
    block: IntArray  # (groups, size): the group's cells (positions in the stratum), -1 pads
    gram: FloatArray  # (groups, size, size)


def _stratum(x: FloatArray, idx: IntArray, groups: IntArray) -> _Stratum:
    _, g = np.unique(groups[idx], return_inverse=True)
    g = g.astype(np.int64)
    n_groups = int(g.max()) + 1 if g.size else 0
    order = np.argsort(g, kind="stable")
    sizes = np.bincount(g, minlength=n_groups)
    width = int(sizes.max(initial=0))
    starts = np.r_[0, np.cumsum(sizes)[:-1]] if n_groups else np.zeros(0, dtype=np.int64)
    block = np.full((n_groups, width), -1, dtype=np.int64)
    col = np.arange(order.size) - np.repeat(starts, sizes)
    block[g[order], col] = order
    xs = x[idx]
    xb = np.where((block >= 0)[..., None], xs[np.maximum(block, 0)], 0.0)  # (G, size, dim)
    return _Stratum(idx, xs, g, n_groups, block, xb @ xb.transpose(0, 2, 1))


def _predict_stratum(st: _Stratum, y: IntArray, n_classes: int) -> IntArray:
    """Leave-group-out nearest-centroid (cosine) class codes for one stratum, for a batch of
    labellings at once (``y``: ``(B, n)``; returns ``(B, n)``).

    For cell ``i`` in group ``g`` and class ``c``, with ``S_c`` the class sum and ``G_gc`` the
    sum over the group's cells of class ``c``, the score is
    ``x_i . (S_c - G_gc) / |S_c - G_gc|``, expanded into dot products (class sums by one
    matrix product, the group terms from each group's Gram matrix), so that no
    group-by-class-by-dimension array is formed.
    """
    xs, g, C = st.x, st.group, n_classes
    b_n, n = y.shape
    onehot = np.zeros((b_n, C, n))
    np.put_along_axis(onehot, y[:, None, :], 1.0, axis=1)
    totals = (onehot.reshape(b_n * C, n) @ xs).reshape(b_n, C, -1)  # S: (B, C, dim)
    xs_s = (xs @ totals.reshape(b_n * C, -1).T).reshape(n, b_n, C).transpose(1, 0, 2)  # (B, n, C)
    pad = st.block < 0
    yb = onehot.transpose(0, 2, 1)[:, np.maximum(st.block, 0)]  # (B, G, size, C)
    yb[:, pad] = 0.0
    within = st.gram[None] @ yb  # (B, G, size, C): x_i . G_gc for the cells of each group
    g_sq = (yb * within).sum(axis=2)  # (B, G, C): |G_gc|^2
    inside = np.zeros((b_n, n, C))
    inside[:, st.block[~pad]] = within[:, ~pad]
    dots = xs_s - inside
    counts = yb.sum(axis=2)  # (B, G, C)
    s_g = (yb * xs_s[:, np.maximum(st.block, 0)]).sum(axis=2)  # (B, G, C): S_c . G_gc
    sq = (totals**2).sum(axis=2)[:, None, :] - 2.0 * s_g + g_sq
    left = (counts.sum(axis=1, keepdims=True) - counts)[:, g] > 0  # (B, n, C)
    norms = np.sqrt(np.maximum(sq, 0.0))[:, g]
    usable = left & (norms > 1e-9)
    scores = np.where(usable, dots / np.where(usable, norms, 1.0), -np.inf)
    return first_max(scores, axis=2)  # equal but for rounding: the class seen first


def _unit(x: ArrayLike) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"features must be a 2-d array (one row per cell), got shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("a cell has an all-zero feature vector")
    return np.asarray(arr / norms, dtype=np.float64)


def _plan(x: FloatArray, g: IntArray, s: IntArray) -> list[_Stratum]:
    return [_stratum(x, np.flatnonzero(s == k), g) for k in np.unique(s)]


def _predict_all(plan: list[_Stratum], y: IntArray, n_classes: int) -> IntArray:
    """Predicted codes for one labelling ``(n,)`` or a batch of labellings ``(B, n)``."""
    batch = np.atleast_2d(y)
    out = np.empty_like(batch)
    for st in plan:
        out[:, st.idx] = _predict_stratum(st, batch[:, st.idx], n_classes)
    return out if y.ndim == 2 else out[0]


def nearest_centroid_predict(
    features: ArrayLike,
    labels: Sequence[Hashable],
    *,
    groups: Sequence[Hashable] | None = None,
    strata: Sequence[Hashable] | None = None,
) -> list[Any]:
    """Predicted label of every cell, each held out with its group (see the module notes)."""
    x = _unit(features)
    n = x.shape[0]
    y, names = _codes(labels, n, "labels")
    g, _ = _codes(groups, n, "groups")
    s = _blocks(strata, n, "strata")[0]
    return [names[k] for k in _predict_all(_plan(x, g, s), y, len(names))]


@dataclass(frozen=True)
class Recovery:
    accuracy: float
    ci: tuple[float, float]  # percentile bootstrap over cells
    null_mean: float
    null_band: tuple[float, float]  # central (1 - alpha) band of the label-shuffle null
    p_value: float  # upper tail: (1 + #{null >= accuracy}) / (1 + n_null)
    chance: float  # 1 / number of classes (naive chance)
    n_cells: int
    n_boot: int
    n_null: int
    per_stratum: dict[str, float]  # accuracy by stratum (empty without strata)
    predicted: tuple[Any, ...]
    correct: tuple[bool, ...]
    credit: tuple[float, ...] = ()  # nearest-cell: each cell's share of tied neighbours with its label


def _summary_fields(
    per_cell: NDArray[Any],
    ci: tuple[float, float],
    null: FloatArray,
    alpha: float,
    n_classes: int,
    n_boot: int,
) -> dict[str, Any]:
    """The fields both classifiers report alike: the accuracy (mean of ``per_cell``), its
    bootstrap interval ``ci``, naive chance, and the label-shuffle null's mean, central
    (1 - alpha) band, size and the Monte Carlo p-value of the accuracy (NaN without a null)."""
    accuracy = float(per_cell.mean())
    if null.size:
        band = (float(np.quantile(null, alpha / 2)), float(np.quantile(null, 1 - alpha / 2)))
        null_mean, p_value = float(null.mean()), monte_carlo_pvalue(null, accuracy, tol=1e-12)
    else:
        band, null_mean, p_value = (float("nan"),) * 2, float("nan"), float("nan")
    return {
        "accuracy": accuracy,
        "ci": ci,
        "null_mean": null_mean,
        "null_band": band,
        "p_value": p_value,
        "n_null": int(null.size),
        "chance": 1.0 / n_classes,
        "n_cells": int(per_cell.shape[0]),
        "n_boot": n_boot,
    }


def _bootstrap_ci(
    per_cell: NDArray[Any], n_boot: int, alpha: float, rng: np.random.Generator
) -> tuple[float, float]:
    """The percentile-bootstrap ``1 - alpha`` interval of the mean of ``per_cell`` (cells
    resampled with replacement; NaN without resamples)."""
    if not n_boot:
        return (float("nan"), float("nan"))
    n = per_cell.shape[0]
    boot = per_cell[rng.integers(n, size=(n_boot, n))].mean(axis=1)
    return (float(np.quantile(boot, alpha / 2)), float(np.quantile(boot, 1 - alpha / 2)))


def _shuffles_within(y: IntArray, blocks: IntArray, rng: np.random.Generator, k: int) -> IntArray:
    """``k`` shuffles of ``y``, one a row ``(k, n)``, each permuting ``y`` within each block."""
    n = y.size
    order = np.lexsort((rng.random((k, n)), np.broadcast_to(blocks, (k, n))), axis=-1)  # grouped by block
    out = np.empty((k, n), dtype=y.dtype)
    out[:, np.argsort(blocks, kind="stable")] = y[order]  # into the block's positions, in order
    return out


def _shuffle_null(
    y: IntArray,
    blocks: IntArray,
    rng: np.random.Generator,
    n_null: int,
    step: int,
    accuracy: Callable[[IntArray], FloatArray],
) -> FloatArray:
    """The label-shuffle null: ``n_null`` shuffles of ``y`` within ``blocks``, drawn ``step`` at a
    time (the same draws as all at once), ``accuracy`` giving one value per shuffled labelling."""
    null = np.empty(n_null)
    for start in range(0, n_null, step):
        yy = _shuffles_within(y, blocks, rng, min(step, n_null - start))
        null[start : start + yy.shape[0]] = accuracy(yy)
    return null


def recoverability(
    features: ArrayLike,
    labels: Sequence[Hashable],
    *,
    rng: np.random.Generator,
    groups: Sequence[Hashable] | None = None,
    strata: Sequence[Hashable] | None = None,
    shuffle_within: Sequence[Hashable] | None = None,
    n_boot: int = 1000,
    n_null: int = 1000,
    alpha: float = 0.05,
) -> Recovery:
    """Nearest-centroid accuracy with a bootstrap interval and a label-shuffle null band."""
    check_alpha(alpha)
    x = _unit(features)
    n = x.shape[0]
    y, names = _codes(labels, n, "labels")
    g, _ = _codes(groups, n, "groups")
    s, s_names = _blocks(strata, n, "strata")
    blocks = _codes(shuffle_within, n, "shuffle_within")[0] if shuffle_within is not None else s
    plan = _plan(x, g, s)
    pred = _predict_all(plan, y, len(names))
    correct = pred == y
    ci = _bootstrap_ci(correct, n_boot, alpha, rng)  # drawn before the null
    step = max(1, min(n_null, 2_000_000 // max(1, n * len(names))))  # labellings per batch
    null = _shuffle_null(
        y, blocks, rng, n_null, step, lambda yy: (_predict_all(plan, yy, len(names)) == yy).mean(axis=1)
    )
    return Recovery(
        **_summary_fields(correct, ci, null, alpha, len(names), n_boot),
        per_stratum=_block_means(correct, s, s_names),
        predicted=tuple(names[k] for k in pred),
        correct=tuple(bool(c) for c in correct),
    )


def within_model_persona(
    features: ArrayLike,
    models: Sequence[Hashable],
    personas: Sequence[Hashable],
    questions: Sequence[Hashable],
    *,
    rng: np.random.Generator,
    n_boot: int = 1000,
    n_null: int = 1000,
) -> Recovery:
    """The seed's appendix C classifier: each model's cells apart, each question held out in
    turn, persona predicted from the same model's persona centroids over the other questions;
    the null shuffles persona labels within each model. ``per_stratum`` is the per-model accuracy."""
    return recoverability(
        features, personas, groups=questions, strata=models, rng=rng, n_boot=n_boot, n_null=n_null
    )


def nearest_cells(features: ArrayLike, chunk: int = 512) -> tuple[IntArray, IntArray, FloatArray]:
    """Each cell's most cosine-similar other cells: ``(cell, neighbour, weight)`` triplets, the
    neighbours tied within ``SCORE_TOL`` (exact dot products) each weighted ``1 / #tied``.
    Float products pick the candidates; their exact products decide."""
    x = _unit(features)
    n = x.shape[0]
    rows: list[int] = []
    cols: list[int] = []
    wts: list[float] = []
    for start in range(0, n, chunk):
        block = x[start : start + chunk] @ x.T
        idx = np.arange(start, min(n, start + chunk))
        block[idx - start, idx] = -np.inf
        best = block.max(axis=1, keepdims=True)
        for k, i in enumerate(idx.tolist()):
            cand = np.flatnonzero(block[k] >= best[k] - 1e-6)
            exact = unit_dots(x[i][None], x[cand])[0]
            tied = cand[exact >= exact.max() - SCORE_TOL]
            rows.extend([i] * tied.size)
            cols.extend(tied.tolist())
            wts.extend([1.0 / tied.size] * tied.size)
    return np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64), np.asarray(wts)


def _credit(y: IntArray, nn: tuple[IntArray, IntArray, FloatArray], n: int) -> FloatArray:
    """Per labelling (rows of ``y``) and cell: the share of its nearest cells with its label."""
    rows, cols, w = nn
    yy = np.atleast_2d(y)
    hit = (yy[:, rows] == yy[:, cols]) * w
    out = np.zeros((yy.shape[0], n))
    for b in range(yy.shape[0]):
        out[b] = np.bincount(rows, weights=hit[b], minlength=n)
    return out


def nearest_cell_recovery(
    features: ArrayLike,
    labels: Sequence[Hashable],
    *,
    rng: np.random.Generator,
    shuffle_within: Sequence[Hashable] | None = None,
    per: Sequence[Hashable] | None = None,
    n_boot: int = 1000,
    n_null: int = 1000,
    alpha: float = 0.05,
    neighbours: tuple[IntArray, IntArray, FloatArray] | None = None,
) -> Recovery:
    """The label of each cell's nearest other cell (see the module notes); ``per`` groups cells
    for ``per_stratum`` (e.g. each model's accuracy); ``neighbours`` reuses
    :func:`nearest_cells` of the same features."""
    check_alpha(alpha)
    nn = neighbours if neighbours is not None else nearest_cells(features)
    n = int(np.asarray(features).shape[0])
    y, names = _codes(labels, n, "labels")
    blocks = _blocks(shuffle_within, n, "shuffle_within")[0]
    credit = _credit(y, nn, n)[0]
    ci = _bootstrap_ci(credit, n_boot, alpha, rng)  # drawn before the null
    step = max(1, min(max(n_null, 1), 4_000_000 // max(1, n)))
    null = _shuffle_null(y, blocks, rng, n_null, step, lambda yy: _credit(yy, nn, n).mean(axis=1))
    g, g_names = _blocks(per, n, "per")
    return Recovery(
        **_summary_fields(credit, ci, null, alpha, len(names), n_boot),
        per_stratum=_block_means(credit, g, g_names),
        predicted=(),  # a tie among neighbours of different labels has no single prediction
        correct=tuple(bool(c == 1.0) for c in credit),
        credit=tuple(float(c) for c in credit),
    )
