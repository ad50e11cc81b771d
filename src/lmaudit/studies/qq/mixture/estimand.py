"""Mixture estimands (seed 000, Prop. 7 and section 6): the aggregate of a population of
components, its exact envelope and the component-level diagnostics. Pure: arrays in, arrays out.

A mixture has ``K`` components; per (item, mapping) each has six binary-conditioned ``P(y)``
values ``x_k`` (in :data:`envelope.POSITIONS` order) and its envelope masses ``(p_y, p_n, o)``.
Weights ``w_AB``, ``w_BA`` (``K``; each sums to 1) are fixed before measurement; equal weights in
both orders are *order-matched* (Prop. 7), different ones are order-dependent selection.

* The aggregate joint of each order is the weighted mixture of the component joints,
  ``joint_AB = sum_k w_AB,k joint_AB,k`` (and BA alike). Its six ``P(y)`` values are weighted
  means of the components' with the *position weights* of :func:`position_weights`: ``w`` at
  position 1, ``w_k P_k(first = a) / sum_j w_j P_j(first = a)`` at position 2 after ``a``.
* ``q``, ``OE_A`` and ``OE_B`` are linear in the pair of joints, and each is the sum of a part
  that depends only on the AB joint and a part that depends only on the BA joint
  (:func:`order_parts`). The allocation variables of different (component, order) blocks are
  disjoint, so the exact range of an aggregate statistic is the weighted sum of its parts'
  ranges (:func:`mixture_envelope`); each part's range comes from the 8 vertices of its block
  (:func:`envelope.vertex_statistics` with the other order's positions pinned to 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.results import JsonRecord
from lmaudit.studies.qq import envelope as env

__all__ = [
    "ItemDiagnostics",
    "QSpread",
    "SaturatedFlags",
    "check_weights",
    "diagnose_item",
    "mix_positions",
    "mixture_envelope",
    "order_parts",
    "position_weights",
    "temper",
]

FloatArray = NDArray[np.float64]
AB_BLOCK = np.array([True, True, True, False, False, False])


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def check_weights(w_ab: ArrayLike, w_ba: ArrayLike, tol: float = 1e-9) -> tuple[FloatArray, FloatArray]:
    """The two weight vectors as arrays; ValueError unless each is >= 0 and sums to 1 within ``tol``."""
    out = []
    for name, w in (("w_AB", w_ab), ("w_BA", w_ba)):
        a = _f(w)
        if a.ndim != 1 or not a.size or (a < 0).any() or not np.isfinite(a).all():
            raise ValueError(f"mixture weights {name} must be a non-empty vector of numbers >= 0, got {w!r}")
        if abs(float(a.sum()) - 1.0) > tol:
            raise ValueError(f"mixture weights {name} sum to {float(a.sum())!r}, not 1 (tolerance {tol:g})")
        out.append(a)
    if out[0].shape != out[1].shape:
        raise ValueError("mixture weights w_AB and w_BA differ in length")
    return out[0], out[1]


def temper(p_y: ArrayLike, p_n: ArrayLike, temperature: float) -> tuple[FloatArray, FloatArray]:
    """Label masses of the temperature-``T`` component from one forward pass: the label pair's
    mass ``p_y + p_n`` kept, split as ``P_T(y | y or n) = sigmoid((log p_y - log p_n) / T)``
    (the binary-conditioned probability of ``softmax(logits / T)``); ``T = 1`` returns the input."""
    from scipy.special import expit  # scipy: when a mixture is analysed, not when qq registers

    py, pn = _f(p_y), _f(p_n)
    if temperature == 1.0:
        return py, pn
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (np.log(py) - np.log(pn)) / temperature
    ok = (py + pn > 0) & ~np.isnan(z)  # no label mass: left to the analysis, which refuses it
    s = py + pn
    # each side from its own sigmoid: a tiny minority answer keeps its relative precision
    return s * np.where(ok, expit(z), 0.5), s * np.where(ok, expit(-z), 0.5)


def position_weights(x: ArrayLike, w_ab: ArrayLike, w_ba: ArrayLike) -> FloatArray:
    """``(K, ..., 6)`` weights of each component at each aggregate position (summing to 1 over
    ``K``): ``w`` at position 1 and ``w_k P_k(first = a)``, normalised, at position 2 after ``a``.
    Where no component reaches a branch (``sum = 0``) the branch's weights fall back to ``w``."""
    xk = _f(x)
    extra = (1,) * (xk.ndim - 2)  # the axes between the components' and the positions
    wa, wb = _f(w_ab).reshape(-1, *extra), _f(w_ba).reshape(-1, *extra)

    def branch(w: FloatArray, reach: FloatArray) -> FloatArray:
        raw = w * reach
        total = raw.sum(axis=0, keepdims=True)
        safe = np.where(total > 0, total, 1.0)
        return np.where(total > 0, raw / safe, np.broadcast_to(w, raw.shape))

    wa_b, wb_b = np.broadcast_to(wa, xk[..., 0].shape), np.broadcast_to(wb, xk[..., 0].shape)
    cols = [
        wa_b,
        branch(wa, xk[..., 0]),
        branch(wa, 1.0 - xk[..., 0]),
        wb_b,
        branch(wb, xk[..., 3]),
        branch(wb, 1.0 - xk[..., 3]),
    ]
    return np.stack(cols, axis=-1)


def mix_positions(values: ArrayLike, weights: ArrayLike) -> FloatArray:
    """``sum_k weights[k] * values[k]``: the aggregate of per-position values ``(K, ..., 6)``."""
    return np.sum(_f(weights) * _f(values), axis=0)


def order_parts(
    p_y: ArrayLike, p_n: ArrayLike, other: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Exact ranges of the AB and BA parts of ``(q, OE_A, OE_B)`` over each order's allocation
    box: ``(ab_lo, ab_hi, ba_lo, ba_hi)``, each ``(..., 3)``. The AB part of a statistic is its
    value with the BA positions at ``P(y) = 0`` (then ``M_BA``, ``p_BA(A_y)`` and ``p_BA(B_y)`` vanish),
    and the BA part alike; the two parts sum to the statistic."""
    py, pn, o = np.broadcast_arrays(_f(p_y), _f(p_n), _f(other))
    out: list[FloatArray] = []
    for block in (AB_BLOCK, ~AB_BLOCK):
        # positions outside the block pinned to P(y) = 0 with no unassigned mass
        stats = env.vertex_statistics(
            np.where(block, py, 0.0), np.where(block, pn, 1.0), np.where(block, o, 0.0)
        )
        values = np.stack(stats, axis=-1)  # (..., 64, 3)
        out += [values.min(axis=-2), values.max(axis=-2)]
    return out[0], out[1], out[2], out[3]


def mixture_envelope(
    p_y: ArrayLike, p_n: ArrayLike, other: ArrayLike, w_ab: ArrayLike, w_ba: ArrayLike
) -> env.StatEnvelope:
    """Exact envelope of the aggregate's ``(q, OE_A, OE_B)`` over every component's unassigned
    mass: masses ``(K, ..., 6)``, weights ``(K,)``; the weights are >= 0, so each bound is the
    weighted sum of the parts' bounds."""
    ab_lo, ab_hi, ba_lo, ba_hi = order_parts(p_y, p_n, other)
    extra = (1,) * (ab_lo.ndim - 1)
    wa, wb = _f(w_ab).reshape(-1, *extra), _f(w_ba).reshape(-1, *extra)
    lo = np.sum(wa * ab_lo + wb * ba_lo, axis=0)
    hi = np.sum(wa * ab_hi + wb * ba_hi, axis=0)
    return env.StatEnvelope(lo[..., 0], hi[..., 0], lo[..., 1], hi[..., 1], lo[..., 2], hi[..., 2])


# ---------------------------------------------------------------- component-level diagnostics


class QSpread(JsonRecord):
    """The spread of the components' ``q`` at one item."""

    min: float
    max: float
    range: float  # max - min
    sd: float  # weighted (AB weights) standard deviation


class SaturatedFlags(JsonRecord):
    """Whether the aggregate is saturated, how many components are, and the plain estimand."""

    aggregate: bool
    components: int
    plain: bool | None  # None: no plain estimand measured


class ItemDiagnostics(JsonRecord):
    """One item's components beside its aggregate (and the plain estimand, when measured)."""

    item: str
    verdict: str  # the aggregate's
    gamma_class: str
    component_verdicts: dict[str, int]  # verdict -> number of components
    component_gamma_classes: dict[str, int]
    violating_components: tuple[str, ...]  # components VIOLATED beyond epsilon
    averaged_away: bool  # some component VIOLATED, the aggregate SATISFIED
    q: float  # the aggregate's
    q_spread: QSpread
    saturated: SaturatedFlags
    dispersion_restored: bool | None  # plain saturated, aggregate not (None: no plain)


def diagnose_item(
    item: str,
    aggregate: Any,
    components: Sequence[tuple[str, float, Any]],
    plain: Any | None = None,
) -> ItemDiagnostics:
    """Diagnostics of one item from its aggregate result and its ``(id, weight, result)``
    components (results with ``verdict``, ``gamma_class``, ``q`` and ``saturated``, such as
    :class:`~lmaudit.studies.qq.results.ItemResult`)."""
    qs = _f([c.q for _, _, c in components])
    w = _f([wt for _, wt, _ in components])
    mean = float(np.sum(w * qs))
    sd = float(np.sqrt(max(0.0, float(np.sum(w * (qs - mean) ** 2)))))
    violating = tuple(cid for cid, _, c in components if c.verdict == env.VIOLATED)
    plain_sat = None if plain is None else bool(plain.saturated)
    return ItemDiagnostics(
        item=item,
        verdict=aggregate.verdict,
        gamma_class=aggregate.gamma_class,
        component_verdicts={v: sum(c.verdict == v for _, _, c in components) for v in env.VERDICTS},
        component_gamma_classes={
            g: sum(c.gamma_class == g for _, _, c in components) for g in env.GAMMA_CLASSES
        },
        violating_components=violating,
        averaged_away=bool(violating) and aggregate.verdict == env.SATISFIED,
        q=float(aggregate.q),
        q_spread=QSpread(float(qs.min()), float(qs.max()), float(qs.max()) - float(qs.min()), sd),
        saturated=SaturatedFlags(
            bool(aggregate.saturated), sum(bool(c.saturated) for _, _, c in components), plain_sat
        ),
        dispersion_restored=None if plain_sat is None else plain_sat and not aggregate.saturated,
    )
