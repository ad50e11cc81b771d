"""QQ analysis: measurement records in, :class:`QQResult` out. Pure: no model, no I/O.

1. Validate the records and group them into cells (item, mapping, order) of three positions.
   An item with a position where neither label has any probability (``p_y = p_n = 0``) has no
   ``P(y | y or n)`` there: it is left out of the verdicts, listed and counted
   (:class:`ExcludedItem`), and its mass still counts for gate G2; every other item is analysed.
2. Per mapping: the binary-conditioned estimate ``P(y | y or n) = p_y / (p_y + p_n)`` at the
   six positions, ``q``, ``OE_A``, ``OE_B`` and their exact envelope over other mass
   ``o = 1 - p_y - p_n`` (see :mod:`lmaudit.studies.qq.envelope`).
3. Per item: equal-weight pooling over whichever mappings are present (records are already
   semantic through ``label_of``). The pooled envelope is the mean of the per-mapping
   envelopes, exactly, since mappings have disjoint allocation variables.
4. Decisions on the pooled envelope (QQ verdict, certified Γ class), saturation, label effect.
   For the sampled estimand the envelope is taken over the item's simultaneous confidence
   region on its positions' probabilities (:mod:`.sampling_error`), so the decisions carry the
   sampling error: VIOLATED only when the whole range of ``q`` over the region lies outside
   the margin.
   The decisions are the seed's, on the full-precision certified bounds: SATISFIED when the
   q envelope lies within ``±(epsilon + float_tol)``, NONCONTEXTUAL when ``Γ_upper <= gamma_tol``
   (0), CONTEXTUAL when ``Γ_lower > gamma_tol``. The envelope spreads each record's own
   ``other`` widened by its rounding residual (:func:`_masses`), and where records carry such a
   residual (masses that do not sum to 1, within ``sum_tol``) the decisions' intervals are also
   widened by the largest one among the positions decided on (:func:`precision`, recorded per
   mapping and item), so nothing is certified by less than the rounding the records show. On
   records that sum to 1 this margin is float round-off (~1e-16) and the rules are the seed's.
5. Study level: counts, saturation sensitivity, other-mass gate G2, memorization alert,
   Prop. 5 discriminant fits, sampled-estimand intervals (:mod:`.diagnostics`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from lmaudit.results import Interval
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq import sampling_error
from lmaudit.studies.qq.diagnostics import (
    FitResult,
    discriminant_fits,
    is_saturated,
    memorization_alert,
    n_saturated_positions,
    sampled_counts,
    sampled_intervals,
)
from lmaudit.studies.qq.item_results import Decision
from lmaudit.studies.qq.params import QQParams
from lmaudit.studies.qq.records import ORDERS, Measurement
from lmaudit.studies.qq.result import QQResult
from lmaudit.studies.qq.results import (
    ExcludedItem,
    ItemResult,
    MappingResult,
    PositionEstimate,
    UndefinedPosition,
)
from lmaudit.studies.qq.sampling_error import SamplingRegion

__all__ = [
    "ExcludedItem",
    "Interval",
    "ItemResult",
    "MappingResult",
    "PositionEstimate",
    "QQParams",
    "QQResult",
    "analyze",
    "assemble",
]

_QUESTION = {("AB", 1): "A", ("AB", 2): "B", ("BA", 1): "B", ("BA", 2): "A"}

# ---------------------------------------------------------------- validation


def _where(m: Measurement) -> str:
    return (
        f"item {m.item!r}, mapping {m.mapping!r}, order {m.order!r}, "
        f"position {m.position} (first answer {m.first_answer!r})"
    )


def _masses(m: Measurement, sum_tol: float) -> tuple[float, float, float, float]:
    """Validated ``(p_y, p_n, o, residual)`` of one record (from counts for sampled records).

    ``o`` is the unassigned mass the envelope spreads: the record's own ``other`` (plus the
    mass of any label outside ``label_of``), never recomputed from the label probabilities.
    ``residual`` is the rounding the record carries: how far ``other`` is from
    ``1 - sum(probs)`` plus how far ``o`` is below 0 (float32 softmaxes sum to 1 + ~1e-7).
    A record whose ``other`` is off by more than ``sum_tol`` is refused; otherwise ``o`` is
    clamped at 0 and widened by ``|residual|``, so the envelope keeps the data's imprecision.
    """
    where = _where(m)
    if m.estimand == "sampled" and m.counts is not None:
        k_y, k_n, k_o = sampled_counts(m)
        total = k_y + k_n + k_o
        if total == 0:
            raise ValueError(f"{where}: no draw was made at this position")
        return k_y / total, k_n / total, k_o / total, 0.0
    try:
        p_y, p_n = float(m.probs[m.label_of["y"]]), float(m.probs[m.label_of["n"]])
    except KeyError as exc:
        raise ValueError(f"{where}: no probability for semantic option/label {exc}") from None
    if m.label_of["y"] == m.label_of["n"]:
        raise ValueError(f"{where}: y and n share the label {m.label_of['y']!r}")
    other = float(m.other)
    for name, val in (("p_y", p_y), ("p_n", p_n), ("other", other)):
        if not (np.isfinite(val) and -sum_tol <= val <= 1.0 + sum_tol):
            raise ValueError(f"{where}: {name} = {val!r} is not a probability in [0, 1]")
    if not (0.0 <= p_y <= 1.0 and 0.0 <= p_n <= 1.0):
        raise ValueError(f"{where}: label probabilities must lie in [0, 1], got p_y={p_y}, p_n={p_n}")
    if p_y + p_n > 1.0 + sum_tol:
        raise ValueError(f"{where}: p_y + p_n = {p_y + p_n!r} exceeds 1")
    label_mass = float(sum(float(v) for v in m.probs.values()))
    off = 1.0 - label_mass - other
    if abs(off) > sum_tol:
        raise ValueError(
            f"{where}: field 'other' = {other!r} disagrees with 1 - sum(probs) = {1.0 - label_mass!r} "
            f"by {abs(off):.3g} (more than sum_tol = {sum_tol:g})"
        )
    o = other + (label_mass - p_y - p_n)
    residual = abs(off) + max(0.0, -o)
    return p_y, p_n, max(0.0, o) + residual, residual


def precision(residuals: ArrayLike) -> float:
    """The margin by which a decision must clear its threshold: the largest rounding residual
    measured among the positions decided on (how far a record's masses are from summing to 1).

    There is no floor: the seed certifies on full-precision bounds (``Γ_upper <= 0``, the QQ
    band with its float tolerance), and a floor such as ``sum_tol`` (1e-6) would turn items
    the seed's rule certifies, e.g. a saturated item with ``Γ_upper = -5e-7``, INDETERMINATE."""
    r = np.asarray(residuals, dtype=np.float64)
    return float(r.max()) if r.size else 0.0


Cells = dict[str, dict[str, dict[str, dict[tuple[int, str | None], Measurement]]]]


def _group(ms: Iterable[Measurement]) -> tuple[Cells, dict[str, str]]:
    cells: Cells = {}
    strata: dict[str, str] = {}
    for m in ms:
        where = _where(m)
        if m.order not in ORDERS:
            raise ValueError(f"{where}: order must be one of {ORDERS}")
        if m.position not in (1, 2):
            raise ValueError(f"{where}: position must be 1 or 2")
        if m.position == 1 and m.first_answer is not None:
            raise ValueError(f"{where}: position 1 has no first answer")
        if m.position == 2 and m.first_answer not in ("y", "n"):
            raise ValueError(f"{where}: position 2 needs first answer 'y' or 'n'")
        if m.question != _QUESTION[(m.order, m.position)]:
            raise ValueError(
                f"{where}: question {m.question!r}, expected {_QUESTION[(m.order, m.position)]!r}"
            )
        if strata.setdefault(m.item, m.stratum) != m.stratum:
            raise ValueError(f"{where}: stratum {m.stratum!r} differs from {strata[m.item]!r}")
        cell = cells.setdefault(m.item, {}).setdefault(m.mapping, {}).setdefault(m.order, {})
        if (m.position, m.first_answer) in cell:
            raise ValueError(f"{where}: duplicate record")
        cell[(m.position, m.first_answer)] = m
    return cells, strata


# ---------------------------------------------------------------- analysis


def _positions(
    item: str, mapping: str, orders: dict[str, dict[tuple[int, str | None], Measurement]]
) -> list[Measurement]:
    out = []
    for order, position, first in env.POSITIONS:
        m = orders.get(order, {}).get((position, first))
        if m is None:
            raise ValueError(
                f"item {item!r}, mapping {mapping!r}, order {order!r}: missing position {position}"
                + (f" (first answer {first!r})" if first else "")
            )
        out.append(m)
    return out


def _iv(lo: ArrayLike, hi: ArrayLike) -> Interval:
    return Interval(float(np.asarray(lo)), float(np.asarray(hi)))


def _envs(e: env.StatEnvelope, g_lo: ArrayLike, g_hi: ArrayLike) -> tuple[Interval, ...]:
    """The envelopes of ``q``, ``OE_A``, ``OE_B`` and the Γ bounds, as intervals."""
    return (
        _iv(e.q_lo, e.q_hi),
        _iv(e.oe_a_lo, e.oe_a_hi),
        _iv(e.oe_b_lo, e.oe_b_hi),
        _iv(g_lo, g_hi),
    )


def analyze(measurements: Iterable[Measurement], params: QQParams | None = None) -> QQResult:
    """Analyse QQ measurement records (those of ``params.estimand``) into a :class:`QQResult`.

    Raises ``ValueError`` naming item, mapping, order and position for malformed input.
    """
    params = QQParams() if params is None else params
    records = list(measurements)
    main = [m for m in records if m.estimand == params.estimand]
    if not main:
        raise ValueError(f"no measurements with estimand {params.estimand!r}")
    cells, strata = _group(main)

    # Flatten every (item, mapping) into a row of six positions and compute in one batch.
    rows: list[tuple[str, str, list[Measurement]]] = []
    for item, by_mapping in cells.items():
        for mapping in sorted(by_mapping):
            rows.append((item, mapping, _positions(item, mapping, by_mapping[mapping])))
    masses = np.array([[_masses(m, params.sum_tol) for m in ms] for _, _, ms in rows])  # (R, 6, 4)
    excluded = _undefined(rows, strata, masses)
    left_out = {x.item for x in excluded}
    keep = [r for r, (item, _, _) in enumerate(rows) if item not in left_out]
    if not keep:
        first = excluded[0]
        raise ValueError(
            f"no item can be analysed: each has a position with no probability on either label "
            f"(p_y = p_n = 0), e.g. item {first.item!r}, mapping {first.undefined[0].mapping!r}, order "
            f"{first.undefined[0].order!r}, position {first.undefined[0].position}"
        )
    masses = masses[keep]
    p_y, p_n, other, residual = masses[..., 0], masses[..., 1], masses[..., 2], masses[..., 3]
    kept = [rows[r] for r in keep]
    keys = [(item, mapping) for item, mapping, _ in kept]
    region = None
    if params.estimand == "sampled":
        # frequencies are estimates: decide over the item's simultaneous region (step 4)
        lo, hi, region = sampling_error.region(
            keys, [[_draw_counts(m) for m in ms] for _, _, ms in kept], params.region_alpha
        )
        box = env.box_envelope(lo, hi)
    else:
        box = env.envelope(p_y, p_n, other)
    return assemble(
        keys,
        strata,
        (p_y, p_n, other),
        env.binary_conditioned(p_y, p_n),
        box,
        [precision(residual[r]) for r in range(len(keep))],
        params,
        sampled_intervals(records, params.interval_alpha),
        excluded,
        region,
    )


def _undefined(
    rows: list[tuple[str, str, list[Measurement]]], strata: dict[str, str], masses: np.ndarray
) -> list[ExcludedItem]:
    """The items with a position where ``p_y = p_n = 0`` (``masses``: ``(R, 6, 4)`` of
    :func:`_masses`), in order of first appearance, each with those positions and its largest
    unassigned mass over every position."""
    undefined: dict[str, list[UndefinedPosition]] = {}
    most: dict[str, float] = {}
    for r, (item, mapping, _) in enumerate(rows):
        most[item] = max(most.get(item, 0.0), float(masses[r, :, 2].max()))
        for i in np.flatnonzero(masses[r, :, 0] + masses[r, :, 1] <= 0.0):
            order, position, first = env.POSITIONS[int(i)]
            undefined.setdefault(item, []).append(UndefinedPosition(mapping, order, position, first))
    return [
        ExcludedItem(item=item, stratum=strata[item], undefined=tuple(where), max_other=most[item])
        for item, where in undefined.items()
    ]


def _draw_counts(m: Measurement) -> tuple[int, int, int]:
    """``(k_y, k_n, n_draws)`` of a sampled record; ``(0, 0, 0)`` (nothing known) without counts."""
    if m.counts is None:
        return 0, 0, 0
    k_y, k_n, k_other = sampled_counts(m)
    return k_y, k_n, k_y + k_n + k_other


def assemble(
    keys: list[tuple[str, str]],
    strata: dict[str, str],
    masses: tuple[np.ndarray, np.ndarray, np.ndarray],
    p: np.ndarray,
    box: env.StatEnvelope,
    margins: list[float],
    params: QQParams,
    sampled: Iterable[Any] = (),
    excluded: Iterable[ExcludedItem] = (),
    sampling: SamplingRegion | None = None,
) -> QQResult:
    """The result of ``R`` rows (item, mapping), each with its six positions' masses
    ``(p_y, p_n, other)`` and ``P(y)`` values ``p`` (``(R, 6)``), its envelope ``box`` and the
    margin its decisions must clear; rows of one item are consecutive. Steps 2-5 above;
    ``excluded``: the items left out in step 1."""
    p_y, p_n, other = masses
    q, oe_a, oe_b = env.qq_statistics(p)
    g_lo, g_hi = env.gamma_bounds(box)

    def decide(e: env.StatEnvelope, lo: float, hi: float, margin: float) -> Decision:
        """Decisions on intervals widened by ``margin``: nothing certified by less."""
        return Decision(
            env.qq_decision(float(e.q_lo) - margin, float(e.q_hi) + margin, params.epsilon, params.float_tol),
            env.gamma_class(lo - margin, hi + margin, params.gamma_tol),
            margin,
        )

    mapping_results: dict[str, list[MappingResult]] = {}
    for r, (item, mapping) in enumerate(keys):
        margin = margins[r]
        decision = decide(box.take(r), float(g_lo[r]), float(g_hi[r]), margin)
        positions = tuple(
            PositionEstimate.of(
                position,
                _QUESTION[(order, position)],
                first,
                float(p_y[r, i]),
                float(p_n[r, i]),
                float(other[r, i]),
                float(p[r, i]),
            )
            for i, (order, position, first) in enumerate(env.POSITIONS)
        )
        mapping_results.setdefault(item, []).append(
            MappingResult.of(
                mapping,
                positions,
                float(q[r]),
                float(oe_a[r]),
                float(oe_b[r]),
                _envs(box.take(r), g_lo[r], g_hi[r]),
                decision,
            )
        )

    items: list[ItemResult] = []
    start = 0
    for item, mrs in mapping_results.items():
        sl = slice(start, start + len(mrs))
        start += len(mrs)
        pooled = box.take(sl).mean()
        lo, hi = env.gamma_bounds(pooled)
        decision = decide(pooled, float(lo), float(hi), precision(margins[sl]))
        p_all = p[sl].ravel()
        items.append(
            ItemResult.of(
                item,
                strata[item],
                mrs,
                float(np.mean(q[sl])),
                float(np.mean(oe_a[sl])),
                float(np.mean(oe_b[sl])),
                float(np.mean(p[sl, 0])),
                float(np.mean(p[sl, 3])),
                _envs(pooled, lo, hi),
                decision,
                (
                    int(p_all.size),
                    n_saturated_positions(p_all, params.saturation_threshold),
                    is_saturated(p_all, params.saturation_threshold),
                ),
            )
        )

    fits: list[FitResult] = []
    for stratum in sorted({r.stratum for r in items}):  # of the items analysed
        rs = [r for r in items if r.stratum == stratum]
        fits.extend(
            discriminant_fits(
                [r.q for r in rs],
                [r.u for r in rs],
                [r.v for r in rs],
                epsilon=params.epsilon,
                stratum=stratum,
            )
        )
    memo = None
    if params.memorization_pairs:
        memo = memorization_alert(
            {r.item: r.oss for r in items},
            params.memorization_pairs,
            params.memorization_threshold,
            params.memorization_min_pairs,
        )
    return QQResult(
        params=params,
        items=tuple(items),
        memorization=memo,
        fits=tuple(fits),
        sampled=tuple(sampled),
        excluded=tuple(excluded),
        sampling=sampling,
    )
