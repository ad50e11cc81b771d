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
held-out group is not a candidate for that group; ties go to the class seen first.

:func:`recoverability` adds the accuracy's percentile-bootstrap interval (cells resampled
with replacement) and a label-shuffle null: labels permuted (within ``shuffle_within``
blocks, by default within strata, e.g. the model-preserving persona shuffle), the whole
classification re-run, and the null's mean, central band and upper-tail Monte Carlo p-value
reported. Randomness comes only from ``rng``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.stats.permutation import monte_carlo_pvalue

__all__ = ["Recovery", "nearest_centroid_predict", "recoverability", "within_model_persona"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _codes(values: Sequence[Hashable] | None, n: int, what: str) -> tuple[IntArray, tuple[Any, ...]]:
    if values is None:
        return np.arange(n, dtype=np.int64), tuple(range(n))
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} entries for {n} cells")
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int64, count=n)
    return codes, tuple(index)


@dataclass(frozen=True)
class _Stratum:
    """What stays fixed while labels are shuffled: the stratum's cells, their groups, and the
    dot products of every pair of cells held out together (``i`` with itself included)."""

    idx: IntArray
    x: FloatArray  # the stratum's cells
    group: IntArray
    n_groups: int
    pair_i: IntArray
    pair_j: IntArray
    pair_dot: FloatArray


def _stratum(x: FloatArray, idx: IntArray, groups: IntArray) -> _Stratum:
    _, g = np.unique(groups[idx], return_inverse=True)
    order = np.argsort(g, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(g[order]) != 0])
    sizes = np.diff(np.r_[starts, order.size])
    pi_parts, pj_parts = [], []
    for start, size in zip(starts, sizes, strict=True):
        members = order[start : start + size]
        pi_parts.append(np.repeat(members, size))
        pj_parts.append(np.tile(members, size))
    pi = np.concatenate(pi_parts) if pi_parts else np.zeros(0, dtype=np.int64)
    pj = np.concatenate(pj_parts) if pj_parts else np.zeros(0, dtype=np.int64)
    xs = x[idx]
    dots = np.einsum("pd,pd->p", xs[pi], xs[pj])
    return _Stratum(idx, xs, g.astype(np.int64), int(g.max()) + 1 if g.size else 0, pi, pj, dots)


def _predict_stratum(st: _Stratum, y: IntArray, n_classes: int) -> IntArray:
    """Leave-group-out nearest-centroid (cosine) class codes for one stratum.

    For cell ``i`` in group ``g`` and class ``c``, with ``S_c`` the class sum and ``G_gc`` the
    sum over the group's cells of class ``c``, the score is
    ``x_i . (S_c - G_gc) / |S_c - G_gc|``, expanded into dot products so that no
    group-by-class-by-dimension array is formed.
    """
    xs, g, C = st.x, st.group, n_classes
    n = xs.shape[0]
    from scipy import sparse

    onehot = sparse.csr_matrix((np.ones(n), (y, np.arange(n))), shape=(C, n))
    totals = np.asarray(onehot @ xs)  # S: (C, dim)
    xs_s = xs @ totals.T  # (n, C)
    yj = y[st.pair_j]
    dots = xs_s - np.bincount(st.pair_i * C + yj, weights=st.pair_dot, minlength=n * C).reshape(n, C)
    same = yj == y[st.pair_i]
    g_sq = np.bincount(
        g[st.pair_i][same] * C + yj[same], weights=st.pair_dot[same], minlength=st.n_groups * C
    ).reshape(st.n_groups, C)
    s_g = np.bincount(g * C + y, weights=xs_s[np.arange(n), y], minlength=st.n_groups * C).reshape(
        st.n_groups, C
    )
    sq = (totals**2).sum(axis=1)[None, :] - 2.0 * s_g + g_sq
    per_count = np.bincount(g * C + y, minlength=st.n_groups * C).reshape(st.n_groups, C)
    left = (per_count.sum(axis=0)[None, :] - per_count)[g] > 0
    norms = np.sqrt(np.maximum(sq, 0.0))[g]
    usable = left & (norms > 1e-9)
    scores = np.where(usable, dots / np.where(usable, norms, 1.0), -np.inf)
    return np.asarray(scores.argmax(axis=1), dtype=np.int64)


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
    out = np.empty_like(y)
    for st in plan:
        out[st.idx] = _predict_stratum(st, y[st.idx], n_classes)
    return out


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
    s = _codes(strata, n, "strata")[0] if strata is not None else np.zeros(n, dtype=np.int64)
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


def _shuffle_within(y: IntArray, blocks: IntArray, rng: np.random.Generator) -> IntArray:
    """``y`` permuted within each block (one shuffle)."""
    order = np.lexsort((rng.random(y.size), blocks))  # rows grouped by block, random inside
    home = np.argsort(blocks, kind="stable")  # the block's positions, in order
    out = np.empty_like(y)
    out[home] = y[order]
    return out


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
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    x = _unit(features)
    n = x.shape[0]
    y, names = _codes(labels, n, "labels")
    g, _ = _codes(groups, n, "groups")
    s, s_names = _codes(strata, n, "strata") if strata is not None else (np.zeros(n, dtype=np.int64), ())
    blocks = _codes(shuffle_within, n, "shuffle_within")[0] if shuffle_within is not None else s
    plan = _plan(x, g, s)
    pred = _predict_all(plan, y, len(names))
    correct = pred == y
    accuracy = float(correct.mean())
    lo_q, hi_q = alpha / 2, 1 - alpha / 2
    if n_boot:
        boot = correct[rng.integers(n, size=(n_boot, n))].mean(axis=1)
        ci = (float(np.quantile(boot, lo_q)), float(np.quantile(boot, hi_q)))
    else:
        ci = (float("nan"), float("nan"))
    null = np.array(
        [
            float((_predict_all(plan, yy, len(names)) == yy).mean())
            for yy in (_shuffle_within(y, blocks, rng) for _ in range(n_null))
        ]
    )
    per = {str(s_names[k]): float(correct[s == k].mean()) for k in range(len(s_names))}
    return Recovery(
        accuracy=accuracy,
        ci=ci,
        null_mean=float(null.mean()) if n_null else float("nan"),
        null_band=(float(np.quantile(null, lo_q)), float(np.quantile(null, hi_q)))
        if n_null
        else (float("nan"),) * 2,
        p_value=monte_carlo_pvalue(null, accuracy, tol=1e-12) if n_null else float("nan"),
        chance=1.0 / len(names),
        n_cells=n,
        n_boot=n_boot,
        n_null=n_null,
        per_stratum=per,
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
