"""The QQ analysis's result (built by :func:`lmaudit.studies.qq.estimation.analyze`): the items,
diagnostics and parameters of one estimand, and the typed results it makes
(:meth:`QQResult.results`, :class:`lmaudit.studies.qq.results.QQResults`)."""

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
    SaturationCount,
    distance_from_determinism,
    is_saturated,
)
from lmaudit.studies.qq.gates import G1Gate, G3Gate, Gates
from lmaudit.studies.qq.mixture.section import MixtureSection
from lmaudit.studies.qq.params import QQParams
from lmaudit.studies.qq.results import (
    Counts,
    ExcludedItem,
    ItemResult,
    MappingResult,
    Mass,
    PositionEstimate,
    QQResults,
    Saturation,
)
from lmaudit.studies.qq.sampling_error import SamplingRegion
from lmaudit.studies.qq.summary import AcrossItems, across_items

__all__ = [
    "ExcludedItem",
    "ItemResult",
    "MappingResult",
    "PositionEstimate",
    "QQParams",
    "QQResult",
]


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

    def saturation_counts(self) -> tuple[SaturationCount, ...]:
        return tuple(
            SaturationCount(float(t), sum(is_saturated(r.p_values(), t) for r in self.items))
            for t in self.params.saturation_sensitivity
        )

    def across_items(self) -> AcrossItems:
        """Mean |q|, the share VIOLATED and the label-mapping effect over the decided items."""
        effects = [r.label_effect.delta_oss for r in self.items if r.label_effect is not None]
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

    @property
    def mass(self) -> Mass:
        return Mass(
            self.max_other,
            self.params.g2_max_other,
            self.g2_pass,
            max(r.envelope_width for r in self.items),
        )

    def results(
        self, gates: Gates | None = None, *, mass: Mass | None = None, mixture: MixtureSection | None = None
    ) -> QQResults:
        """The typed results (gates: G1 and G3 not run, G2 from the mass, when not given;
        ``mass``: the run's, when more than this estimand was measured)."""
        mass = self.mass if mass is None else mass
        if gates is None:
            gates = Gates(G1Gate("NOT_RUN", 0), mass.gate(), G3Gate("NOT_RUN", ()))
        n_sat = sum(r.saturated for r in self.items)
        return QQResults(
            params=self.params.recorded(),
            n_items=len(self.items),
            counts=Counts(
                self.verdict_counts(),
                self.gamma_counts(),
                n_sat,
                len(self.excluded) if self.excluded else None,
            ),
            across_items=self.across_items(),
            saturation=Saturation(
                self.params.saturation_threshold, n_sat, len(self.items), self.saturation_counts()
            ),
            mass=mass,
            memorization=self.memorization,
            fits=self.fits,
            items=self.items,
            excluded=self.excluded or None,
            sampled=self.sampled,
            sampling_error=self.sampling,
            gates=gates,
            mixture=mixture,
        )

    def to_json(self) -> dict[str, Any]:
        """The body of ``results.json`` without its gates (:meth:`results` has them)."""
        doc = self.results().to_json()
        del doc["gates"]
        return doc
