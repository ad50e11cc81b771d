"""QQ statistics of one (item, mapping) and their exact robustness envelope over "other" mass.

A mapping of an item has six measured positions, always held in this order (``POSITIONS``)::

    0: AB, position 1           P_AB(A_y)          = u
    1: AB, position 2 | A = y   P_AB(B_y | A_y)
    2: AB, position 2 | A = n   P_AB(B_y | A_n)
    3: BA, position 1           P_BA(B_y)          = v
    4: BA, position 2 | B = y   P_BA(A_y | B_y)
    5: BA, position 2 | B = n   P_BA(A_y | B_n)

From the six ``P(y)`` values ``x``:
``M_AB = x0 (1 - x1) + (1 - x0) x2``, ``M_BA = x3 (1 - x4) + (1 - x3) x5``,
``q = M_AB - M_BA``, ``OE_A = p_BA(A_y) - p_AB(A_y) = x3 x4 + (1 - x3) x5 - x0`` and
``OE_B = p_AB(B_y) - p_BA(B_y) = x0 x1 + (1 - x0) x2 - x3``.

Unassigned mass ``o`` at a position is allocated by ``t ∈ [0, 1]``:
``P(y) = (p_y + t o) / (p_y + p_n + o)``. The binary-conditioned point estimate
``p_y / (p_y + p_n)`` is the allocation ``t = p_y / (p_y + p_n)``, so it lies inside the
envelope; ``o = 0`` collapses the envelope to it. ``q``, ``OE_A`` and ``OE_B`` are
multilinear in the six ``t`` (each is affine in every single ``x_i``, and ``x_i`` is affine
in ``t_i``), so their exact ranges over the box ``[0, 1]^6`` are attained at its 64 vertices.

All functions broadcast over leading axes: position arrays have shape ``(..., 6)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.studies.qq.config import QQStudyConfig

FloatArray = NDArray[np.float64]

POSITIONS: tuple[tuple[str, int, str | None], ...] = (
    ("AB", 1, None),
    ("AB", 2, "y"),
    ("AB", 2, "n"),
    ("BA", 1, None),
    ("BA", 2, "y"),
    ("BA", 2, "n"),
)

SATISFIED, VIOLATED, INDETERMINATE = "SATISFIED", "VIOLATED", "INDETERMINATE"
NONCONTEXTUAL, CONTEXTUAL = "NONCONTEXTUAL", "CONTEXTUAL"
VERDICTS = (SATISFIED, VIOLATED, INDETERMINATE)
GAMMA_CLASSES = (NONCONTEXTUAL, CONTEXTUAL, INDETERMINATE)

# The 2^6 vertices of the allocation box, one row per vertex (bit i of the row index = t_i).
VERTICES: NDArray[np.bool_] = ((np.arange(64)[:, None] >> np.arange(6)[None, :]) & 1).astype(bool)


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def binary_conditioned(p_y: ArrayLike, p_n: ArrayLike) -> FloatArray:
    """The audit estimand ``P(y | y or n) = p_y / (p_y + p_n)``."""
    py = _f(p_y)
    return py / (py + _f(p_n))


def allocate(p_y: ArrayLike, p_n: ArrayLike, other: ArrayLike, t: ArrayLike) -> FloatArray:
    """``P(y) = (p_y + t·o) / (p_y + p_n + o)``: ``o`` split ``t`` to ``y``, ``1 - t`` to ``n``."""
    py, o = _f(p_y), _f(other)
    return (py + _f(t) * o) / (py + _f(p_n) + o)


def qq_statistics(x: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(q, OE_A, OE_B)`` from the six position probabilities ``x[..., 6]``."""
    p = _f(x)
    x0, x1, x2, x3, x4, x5 = (p[..., i] for i in range(6))
    m_ab = x0 * (1 - x1) + (1 - x0) * x2
    m_ba = x3 * (1 - x4) + (1 - x3) * x5
    oe_a = x3 * x4 + (1 - x3) * x5 - x0
    oe_b = x0 * x1 + (1 - x0) * x2 - x3
    return m_ab - m_ba, oe_a, oe_b


def joints(x: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``(joint_AB, joint_BA)`` of shape ``(..., 2, 2)``, ``[first, second]``, 0 = ``y``.

    ``joint_AB[a, b] = P_AB(A_a) P_AB(B_b | A_a)``; ``joint_BA[b, a] = P_BA(B_b) P_BA(A_a | B_b)``.
    """
    p = _f(x)

    def one(first: FloatArray, given_y: FloatArray, given_n: FloatArray) -> FloatArray:
        row_y = np.stack([first * given_y, first * (1 - given_y)], -1)
        row_n = np.stack([(1 - first) * given_n, (1 - first) * (1 - given_n)], -1)
        return np.stack([row_y, row_n], -2)

    return one(p[..., 0], p[..., 1], p[..., 2]), one(p[..., 3], p[..., 4], p[..., 5])


@dataclass(frozen=True)
class StatEnvelope:
    """Exact ranges of ``q``, ``OE_A``, ``OE_B`` over the allocation box (arrays over ``...``)."""

    q_lo: FloatArray
    q_hi: FloatArray
    oe_a_lo: FloatArray
    oe_a_hi: FloatArray
    oe_b_lo: FloatArray
    oe_b_hi: FloatArray

    def take(self, index: int | slice) -> StatEnvelope:
        """The envelope(s) at ``index`` of the leading axis."""
        return StatEnvelope(*(getattr(self, f)[index] for f in self.__dataclass_fields__))

    def mean(self, axis: int = 0) -> StatEnvelope:
        """Equal-weight pooling over independent blocks (e.g. label mappings) along ``axis``.

        Exact because the blocks have disjoint allocation variables: the range of a sum of
        functions of disjoint variables is the sum of their ranges.
        """
        return StatEnvelope(*(np.mean(getattr(self, f), axis=axis) for f in self.__dataclass_fields__))


def vertex_statistics(
    p_y: ArrayLike, p_n: ArrayLike, other: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(q, OE_A, OE_B)`` at each of the 64 vertices: arrays of shape ``(..., 64)``."""
    py, pn, o = np.broadcast_arrays(_f(p_y), _f(p_n), _f(other))
    total = py + pn + o
    return _box_vertex_statistics(py / total, (py + o) / total)


def _box_vertex_statistics(lo: FloatArray, hi: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(q, OE_A, OE_B)`` at the 64 vertices of the box ``lo <= P(y) <= hi`` (``(..., 6)`` each)."""
    x = np.where(VERTICES, hi[..., None, :], lo[..., None, :])  # (..., 64, 6)
    return qq_statistics(x)


def _ranges(q: FloatArray, oe_a: FloatArray, oe_b: FloatArray) -> StatEnvelope:
    return StatEnvelope(q.min(-1), q.max(-1), oe_a.min(-1), oe_a.max(-1), oe_b.min(-1), oe_b.max(-1))


def envelope(p_y: ArrayLike, p_n: ArrayLike, other: ArrayLike) -> StatEnvelope:
    """Exact envelope by vertex enumeration; inputs are raw masses of shape ``(..., 6)``."""
    return _ranges(*vertex_statistics(p_y, p_n, other))


def box_envelope(lo: ArrayLike, hi: ArrayLike) -> StatEnvelope:
    """Exact ranges of ``q``, ``OE_A``, ``OE_B`` when each position's ``P(y)`` may lie anywhere in
    ``[lo, hi]`` (shape ``(..., 6)``): the statistics are multilinear in the six ``P(y)``, so the
    extremes are at the 64 vertices. :func:`envelope` is the box ``[p_y, p_y + o] / total``."""
    lo_f, hi_f = np.broadcast_arrays(_f(lo), _f(hi))
    if np.any(lo_f > hi_f):
        raise ValueError("box_envelope needs lo <= hi at every position")
    return _ranges(*_box_vertex_statistics(lo_f, hi_f))


def abs_range(lo: ArrayLike, hi: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Range of ``|x|`` for ``x ∈ [lo, hi]``: min is 0 if the interval holds 0."""
    lo_f, hi_f = _f(lo), _f(hi)
    straddles = (lo_f <= 0) & (hi_f >= 0)
    abs_min = np.where(straddles, 0.0, np.minimum(np.abs(lo_f), np.abs(hi_f)))
    abs_max = np.maximum(np.abs(lo_f), np.abs(hi_f))
    return abs_min, abs_max


def gamma_bounds(env: StatEnvelope) -> tuple[FloatArray, FloatArray]:
    """Certified ``(Γ_lower, Γ_upper)`` for ``Γ = |q| - |OE_A| - |OE_B|`` over the box.

    ``Γ_upper = |q|_max - |OE_A|_min - |OE_B|_min`` and
    ``Γ_lower = |q|_min - |OE_A|_max - |OE_B|_max``. Sound because each term is bounded
    separately by its exact range; conservative because the three extremes need not be
    attained at the same allocation.
    """
    q_min, q_max = abs_range(env.q_lo, env.q_hi)
    a_min, a_max = abs_range(env.oe_a_lo, env.oe_a_hi)
    b_min, b_max = abs_range(env.oe_b_lo, env.oe_b_hi)
    return q_min - a_max - b_max, q_max - a_min - b_min


def qq_decision(
    q_lo: float, q_hi: float, epsilon: float = QQStudyConfig.epsilon, tol: float = QQStudyConfig.float_tol
) -> str:
    """Equivalence decision on ``[q_lo, q_hi]`` with margin ``epsilon`` and float tolerance ``tol``.

    SATISFIED if the whole interval lies in ``[-(ε+tol), ε+tol]``; VIOLATED if it lies
    entirely beyond ``ε + tol`` on one side; otherwise INDETERMINATE.
    """
    band = epsilon + tol
    if q_lo >= -band and q_hi <= band:
        return SATISFIED
    if q_lo > band or q_hi < -band:
        return VIOLATED
    return INDETERMINATE


def gamma_class(gamma_lower: float, gamma_upper: float, gamma_tol: float = 0.0) -> str:
    """NONCONTEXTUAL if ``Γ_upper <= gamma_tol``; CONTEXTUAL if ``Γ_lower > gamma_tol``.

    ``gamma_tol`` defaults to 0 on purpose: an item sitting on the boundary ``|q| = OSS``
    whose statistics move at all with its other mass (even ~1e-7) gets
    ``Γ_lower <= 0 < Γ_upper`` and stays INDETERMINATE, as in the seed's pilot tables; a
    positive tolerance would silently certify such items as noncontextual.
    """
    if gamma_upper <= gamma_tol:
        return NONCONTEXTUAL
    if gamma_lower > gamma_tol:
        return CONTEXTUAL
    return INDETERMINATE
