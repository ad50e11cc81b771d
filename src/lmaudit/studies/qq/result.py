"""Result objects of the QQ analysis (built by :func:`lmaudit.studies.qq.estimation.analyze`).

``QQResult.to_json()`` is the stable, JSON-serialisable form written to the results file:
plain floats, ints, strings, bools, lists and dicts; items in input order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.diagnostics import (
    FitResult,
    MemorizationResult,
    SampledInterval,
    distance_from_determinism,
    is_saturated,
)
from lmaudit.studies.qq.params import QQParams
from lmaudit.studies.qq.records import ORDERS
from lmaudit.studies.qq.sampling_error import SamplingRegion
from lmaudit.studies.qq.summary import AcrossItems, across_items

__all__ = [
    "ExcludedItem",
    "Interval",
    "ItemResult",
    "MappingResult",
    "PositionEstimate",
    "QQParams",
    "QQResult",
]

_JOINT_KEYS = ("yy", "yn", "ny", "nn")


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def contains(self, x: float, tol: float = 0.0) -> bool:
        return self.lo - tol <= x <= self.hi + tol

    def to_json(self) -> list[float]:
        return [self.lo, self.hi]


@dataclass(frozen=True)
class PositionEstimate:
    order: str
    position: int
    question: str
    first_answer: str | None
    p_y: float  # raw label probabilities (semantic)
    p_n: float
    other: float  # unassigned mass in the envelope: the record's other, widened by its rounding residual
    p: float  # binary-conditioned P(y | y or n)

    @property
    def d(self) -> float:
        """Distance from determinism ``1 - max(p, 1 - p)``."""
        return float(distance_from_determinism(self.p))

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "question": self.question,
            "first_answer": self.first_answer,
            "p_y": self.p_y,
            "p_n": self.p_n,
            "other": self.other,
            "p": self.p,
            "d": self.d,
        }


def _stats_json(r: MappingResult | ItemResult) -> dict[str, Any]:
    return {
        "q": r.q,
        "oe_a": r.oe_a,
        "oe_b": r.oe_b,
        "oss": r.oss,
        "gamma": r.gamma,
        "u": r.u,
        "v": r.v,
        "q_env": r.q_env.to_json(),
        "oe_a_env": r.oe_a_env.to_json(),
        "oe_b_env": r.oe_b_env.to_json(),
        "envelope_width": r.q_env.width,
        "gamma_bounds": r.gamma_bounds.to_json(),
        "verdict": r.verdict,
        "gamma_class": r.gamma_class,
        "precision": r.precision,
        "max_other": r.max_other,
    }


@dataclass(frozen=True)
class MappingResult:
    """One label mapping of one item, in semantic coordinates."""

    mapping: str
    positions: tuple[PositionEstimate, ...]  # six, in envelope.POSITIONS order
    q: float
    oe_a: float
    oe_b: float
    q_env: Interval
    oe_a_env: Interval
    oe_b_env: Interval
    gamma_bounds: Interval  # (Γ_lower, Γ_upper) of this mapping alone
    verdict: str
    gamma_class: str
    precision: float = (
        0.0  # largest rounding residual decided on: no decision is certified by less (analysis.precision)
    )

    @property
    def oss(self) -> float:
        return abs(self.oe_a) + abs(self.oe_b)

    @property
    def gamma(self) -> float:
        return abs(self.q) - self.oss

    @property
    def u(self) -> float:
        return self.positions[0].p

    @property
    def v(self) -> float:
        return self.positions[3].p

    @property
    def max_other(self) -> float:
        return max(p.other for p in self.positions)

    def joint(self, order: str) -> NDArray[np.float64]:
        """Point-estimate joint of ``order``, 2x2 ``[first, second]`` in presentation order."""
        j_ab, j_ba = env.joints([p.p for p in self.positions])
        return {"AB": j_ab, "BA": j_ba}[order]

    def to_json(self) -> dict[str, Any]:
        cells = []
        for i, order in enumerate(ORDERS):
            j = self.joint(order).ravel().tolist()
            cells.append(
                {
                    "order": order,
                    "joint": dict(zip(_JOINT_KEYS, j, strict=True)),
                    "positions": [p.to_json() for p in self.positions[3 * i : 3 * i + 3]],
                }
            )
        return {"mapping": self.mapping, **_stats_json(self), "cells": cells}


@dataclass(frozen=True)
class ItemResult:
    """One item, pooled with equal weights over its mappings."""

    item: str
    stratum: str
    mappings: tuple[MappingResult, ...]  # sorted by mapping name
    q: float
    oe_a: float
    oe_b: float
    u: float  # pooled p_AB(A_y)
    v: float  # pooled p_BA(B_y)
    q_env: Interval
    oe_a_env: Interval
    oe_b_env: Interval
    gamma_bounds: Interval  # certified (Γ_lower, Γ_upper)
    verdict: str
    gamma_class: str
    n_positions: int
    n_saturated_positions: int  # at params.saturation_threshold
    saturated: bool
    precision: float = (
        0.0  # largest rounding residual decided on: no decision is certified by less (analysis.precision)
    )

    @property
    def oss(self) -> float:
        return abs(self.oe_a) + abs(self.oe_b)

    @property
    def gamma(self) -> float:
        return abs(self.q) - self.oss

    @property
    def s(self) -> float:
        return self.u * (1 - self.v) + (1 - self.u) * self.v

    @property
    def max_other(self) -> float:
        return max(m.max_other for m in self.mappings)

    @property
    def envelope_width(self) -> float:
        return self.q_env.width

    def p_values(self) -> list[float]:
        """Binary-conditioned ``p`` at every measured position of every mapping."""
        return [p.p for m in self.mappings for p in m.positions]

    def label_effect(self) -> dict[str, Any] | None:
        """Per-mapping ``q`` and OSS with their spread (``|Δ|`` for two mappings)."""
        if len(self.mappings) < 2:
            return None
        qs = [m.q for m in self.mappings]
        oss = [m.oss for m in self.mappings]
        return {
            "q": {m.mapping: m.q for m in self.mappings},
            "oss": {m.mapping: m.oss for m in self.mappings},
            "delta_q": max(qs) - min(qs),
            "delta_oss": max(oss) - min(oss),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "stratum": self.stratum,
            **_stats_json(self),
            "s": self.s,
            "n_positions": self.n_positions,
            "n_saturated_positions": self.n_saturated_positions,
            "saturated": self.saturated,
            "label_effect": self.label_effect(),
            "mappings": [m.to_json() for m in self.mappings],
        }


@dataclass(frozen=True)
class ExcludedItem:
    """An item left out of the verdicts: at its ``undefined`` positions neither label has any
    probability (``p_y = p_n = 0``: a label absent from a server's top alternatives, or no
    sampled draw on either label), so ``P(y | y or n)`` and the item's ``q``, OE and Γ are
    undefined. Its mass still counts for gate G2."""

    item: str
    stratum: str
    undefined: tuple[tuple[str, str, int, str | None], ...]  # (mapping, order, position, first answer)
    max_other: float  # over every measured position of the item

    def to_json(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "stratum": self.stratum,
            "reason": "no probability on either label (p_y = p_n = 0): P(y | y or n) is undefined",
            "undefined": [
                {"mapping": m, "order": o, "position": pos, "first_answer": first}
                for m, o, pos, first in self.undefined
            ],
            "max_other": self.max_other,
        }


@dataclass(frozen=True)
class QQResult:
    params: QQParams
    items: tuple[ItemResult, ...]  # in order of first appearance in the input
    memorization: MemorizationResult | None
    fits: tuple[FitResult, ...]  # per stratum (sorted), polarity then position family
    sampled: tuple[SampledInterval, ...]
    excluded: tuple[ExcludedItem, ...] = ()  # in order of first appearance in the input
    # the sampled estimand's region the decisions carry (None: decided on exact probabilities)
    sampling: SamplingRegion | None = None

    def item(self, item_id: str) -> ItemResult:
        for r in self.items:
            if r.item == item_id:
                return r
        raise KeyError(f"no item {item_id!r} in the result")

    def joint(self, item_id: str, mapping: str, order: str) -> NDArray[np.float64]:
        for m in self.item(item_id).mappings:
            if m.mapping == mapping:
                return m.joint(order)
        raise KeyError(f"item {item_id!r} has no mapping {mapping!r}")

    def distances(self, item_ids: Iterable[str] | None = None) -> NDArray[np.float64]:
        """Distance from determinism at every position (of the given items), for the CDF figure."""
        chosen = self.items if item_ids is None else [self.item(i) for i in item_ids]
        return distance_from_determinism([p for r in chosen for p in r.p_values()])

    def verdict_counts(self) -> dict[str, int]:
        return {v: sum(r.verdict == v for r in self.items) for v in env.VERDICTS}

    def gamma_counts(self) -> dict[str, int]:
        return {c: sum(r.gamma_class == c for r in self.items) for c in env.GAMMA_CLASSES}

    def saturation_counts(self) -> list[dict[str, Any]]:
        return [
            {"threshold": float(t), "n_saturated": sum(is_saturated(r.p_values(), t) for r in self.items)}
            for t in self.params.saturation_sensitivity
        ]

    def across_items(self) -> AcrossItems:
        """Mean |q|, the share VIOLATED and the label-mapping effect over the decided items."""
        effects = [e["delta_oss"] for r in self.items if (e := r.label_effect()) is not None]
        return across_items(
            [abs(r.q) for r in self.items],
            [r.verdict == "VIOLATED" for r in self.items],
            effects,
            large_threshold=self.params.memorization_threshold,
        )

    @property
    def max_other(self) -> float:
        """The largest unassigned mass at any measured position, excluded items' included (G2)."""
        return max([*(r.max_other for r in self.items), *(x.max_other for x in self.excluded)])

    @property
    def g2_pass(self) -> bool:
        return self.max_other < self.params.g2_max_other

    def to_json(self) -> dict[str, Any]:
        n_sat = sum(r.saturated for r in self.items)
        # items left out, when any: counted beside the verdicts and listed with their positions
        excluded = {"excluded": len(self.excluded)} if self.excluded else {}
        return {
            "study": "qq",
            "params": self.params.to_json(),
            "n_items": len(self.items),
            "counts": {
                "verdict": self.verdict_counts(),
                "gamma_class": self.gamma_counts(),
                "saturated": n_sat,
                **excluded,
            },
            "summary": self.across_items().to_json(),
            "saturation": {
                "threshold": self.params.saturation_threshold,
                "n_saturated": n_sat,
                "n_items": len(self.items),
                "sensitivity": self.saturation_counts(),
            },
            "mass": {
                "max_other": self.max_other,
                "g2_max_other": self.params.g2_max_other,
                "g2_pass": self.g2_pass,
                "max_envelope_width": max(r.envelope_width for r in self.items),
            },
            "memorization": None if self.memorization is None else self.memorization.to_json(),
            "fits": [f.to_json() for f in self.fits],
            "items": [r.to_json() for r in self.items],
            **({"excluded": [x.to_json() for x in self.excluded]} if self.excluded else {}),
            "sampled": [s.to_json() for s in self.sampled],
            **({} if self.sampling is None else {"sampling_error": self.sampling.to_json()}),
        }
