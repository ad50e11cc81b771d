"""The per-item records of the QQ results (``results.items``): each item pooled over its
label mappings, each mapping with its two orders' cells, each cell with its joint and its three
positions. The values derived from others (``d``, ``oss``, ``gamma``, ``u``, ``v``, ``s``,
``envelope_width``, ``max_other``, the joints, ``label_effect``) are computed once, when the
analysis builds a record (the ``of`` constructors), and read back as they were written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypedDict

import numpy as np
from numpy.typing import NDArray

from lmaudit.results import Interval, JsonRecord
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.diagnostics import distance_from_determinism
from lmaudit.studies.qq.records import ORDERS

__all__ = ["Cell", "ItemResult", "Joint", "LabelEffect", "MappingResult", "PositionEstimate"]


class PositionEstimate(JsonRecord):
    """One measured position of a mapping, in semantic coordinates."""

    position: int
    question: str
    first_answer: str | None
    p_y: float  # raw label probabilities (semantic)
    p_n: float
    other: float  # unassigned mass in the envelope: the record's other, widened by its rounding residual
    p: float  # binary-conditioned P(y | y or n)
    d: float  # distance from determinism 1 - max(p, 1 - p)

    @classmethod
    def of(
        cls,
        position: int,
        question: str,
        first_answer: str | None,
        p_y: float,
        p_n: float,
        other: float,
        p: float,
    ) -> PositionEstimate:
        return cls(position, question, first_answer, p_y, p_n, other, p, float(distance_from_determinism(p)))


class Joint(JsonRecord):
    """A 2x2 joint ``[first, second]`` in presentation order, by cell."""

    yy: float
    yn: float
    ny: float
    nn: float

    def array(self) -> NDArray[np.float64]:
        return np.array([[self.yy, self.yn], [self.ny, self.nn]])


class Cell(JsonRecord):
    """One order of a mapping: its point-estimate joint and its three positions."""

    order: str
    joint: Joint
    positions: tuple[PositionEstimate, ...]


class _Stats(JsonRecord, kw_only=True):
    """The QQ statistics, their envelopes and decisions, of a mapping or a pooled item."""

    q: float
    oe_a: float
    oe_b: float
    oss: float  # |OE_A| + |OE_B|
    gamma: float  # |q| - OSS
    u: float  # p_AB(A_y)
    v: float  # p_BA(B_y)
    q_env: Interval
    oe_a_env: Interval
    oe_b_env: Interval
    envelope_width: float  # of q_env
    gamma_bounds: Interval  # certified (Γ_lower, Γ_upper)
    verdict: str
    gamma_class: str
    # largest rounding residual decided on: no decision is certified by less (estimation.precision)
    precision: float
    max_other: float


class Decision(NamedTuple):
    """The decisions on a mapping's or an item's envelopes, and the rounding residual they were
    decided with (``precision``: no decision is certified by less)."""

    verdict: str
    gamma_class: str
    precision: float


class _StatFields(TypedDict):
    q: float
    oe_a: float
    oe_b: float
    oss: float
    gamma: float
    u: float
    v: float
    q_env: Interval
    oe_a_env: Interval
    oe_b_env: Interval
    envelope_width: float
    gamma_bounds: Interval
    verdict: str
    gamma_class: str
    precision: float


def _stats(
    q: float, oe_a: float, oe_b: float, u: float, v: float, envs: Sequence[Interval], decision: Decision
) -> _StatFields:
    """The statistics fields of ``q``, ``OE_A``, ``OE_B``, ``u``, ``v``, the envelopes
    ``(q, OE_A, OE_B, Γ bounds)`` and the decisions on them, with the values derived from them."""
    q_env, oe_a_env, oe_b_env, gamma_bounds = envs
    oss = abs(oe_a) + abs(oe_b)
    return _StatFields(
        q=q,
        oe_a=oe_a,
        oe_b=oe_b,
        oss=oss,
        gamma=abs(q) - oss,
        u=u,
        v=v,
        q_env=q_env,
        oe_a_env=oe_a_env,
        oe_b_env=oe_b_env,
        envelope_width=q_env.width,
        gamma_bounds=gamma_bounds,
        verdict=decision.verdict,
        gamma_class=decision.gamma_class,
        precision=decision.precision,
    )


class MappingResult(_Stats, kw_only=True):
    """One label mapping of one item."""

    mapping: str
    cells: tuple[Cell, ...]  # AB, then BA

    @classmethod
    def of(
        cls,
        mapping: str,
        positions: Sequence[PositionEstimate],
        q: float,
        oe_a: float,
        oe_b: float,
        envs: Sequence[Interval],
        decision: Decision,
    ) -> MappingResult:
        """The mapping of its six positions (``envelope.POSITIONS`` order), statistics, envelopes
        ``(q, OE_A, OE_B, Γ bounds)`` and decisions; the joints and derived values computed here."""
        joints = env.joints([p.p for p in positions])
        cells = tuple(
            Cell(order, Joint(*(float(x) for x in j.ravel())), tuple(positions[3 * i : 3 * i + 3]))
            for i, (order, j) in enumerate(zip(ORDERS, joints, strict=True))
        )
        return cls(
            mapping=mapping,
            cells=cells,
            **_stats(q, oe_a, oe_b, positions[0].p, positions[3].p, envs, decision),
            max_other=max(p.other for p in positions),
        )

    @property
    def positions(self) -> tuple[PositionEstimate, ...]:
        """The six positions in ``envelope.POSITIONS`` order."""
        return tuple(p for c in self.cells for p in c.positions)

    def joint(self, order: str) -> NDArray[np.float64]:
        """Point-estimate joint of ``order``, 2x2 ``[first, second]`` in presentation order."""
        for c in self.cells:
            if c.order == order:
                return c.joint.array()
        raise KeyError(f"mapping {self.mapping!r} has no order {order!r}")


class LabelEffect(JsonRecord):
    """Per-mapping ``q`` and OSS of an item with their spread (``|Δ|`` for two mappings)."""

    q: dict[str, float]
    oss: dict[str, float]
    delta_q: float
    delta_oss: float

    @classmethod
    def of(cls, mappings: Sequence[MappingResult]) -> LabelEffect | None:
        if len(mappings) < 2:
            return None
        qs = [m.q for m in mappings]
        oss = [m.oss for m in mappings]
        return cls(
            {m.mapping: m.q for m in mappings},
            {m.mapping: m.oss for m in mappings},
            max(qs) - min(qs),
            max(oss) - min(oss),
        )


class ItemResult(_Stats, kw_only=True):
    """One item, pooled with equal weights over its mappings."""

    item: str
    stratum: str
    s: float  # u (1 - v) + (1 - u) v
    n_positions: int
    n_saturated_positions: int  # at params.saturation_threshold
    saturated: bool
    label_effect: LabelEffect | None
    mappings: tuple[MappingResult, ...]  # sorted by mapping name

    @classmethod
    def of(
        cls,
        item: str,
        stratum: str,
        mappings: Sequence[MappingResult],
        q: float,
        oe_a: float,
        oe_b: float,
        u: float,
        v: float,
        envs: Sequence[Interval],
        decision: Decision,
        saturation: tuple[int, int, bool],  # positions, saturated positions, saturated
    ) -> ItemResult:
        n_positions, n_saturated, saturated = saturation
        return cls(
            item=item,
            stratum=stratum,
            **_stats(q, oe_a, oe_b, u, v, envs, decision),
            max_other=max(m.max_other for m in mappings),
            s=u * (1 - v) + (1 - u) * v,
            n_positions=n_positions,
            n_saturated_positions=n_saturated,
            saturated=saturated,
            label_effect=LabelEffect.of(mappings),
            mappings=tuple(mappings),
        )

    def p_values(self) -> list[float]:
        """Binary-conditioned ``p`` at every measured position of every mapping."""
        return [p.p for m in self.mappings for p in m.positions]
