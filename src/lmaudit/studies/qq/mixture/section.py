"""The ``mixture`` section of a mixture run's results: its components and the plain estimand
summarised, each item's component-level diagnostics, study counts and the distances of Fig. 1
(built by :func:`lmaudit.studies.qq.mixture.analysis.mixture_section`)."""

from __future__ import annotations

from lmaudit.results import Interval, JsonRecord
from lmaudit.studies.qq.diagnostics import SaturationCount
from lmaudit.studies.qq.mixture.estimand import ItemDiagnostics

__all__ = [
    "ComponentItem",
    "ComponentSummary",
    "Distances",
    "EstimandCounts",
    "MixtureCounts",
    "MixtureSaturation",
    "MixtureSection",
    "NearDeterministic",
    "PlainSummary",
]


class ComponentItem(JsonRecord):
    """One item of one estimand (a component or the plain one), in brief."""

    item: str
    q: float
    oss: float
    q_env: Interval
    gamma_bounds: Interval
    verdict: str
    gamma_class: str
    saturated: bool
    n_saturated_positions: int
    max_other: float


class EstimandCounts(JsonRecord):
    """One estimand's items per verdict and Γ class, and its saturated items."""

    verdict: dict[str, int]
    gamma_class: dict[str, int]
    saturated: int


class _EstimandSummary(JsonRecord, kw_only=True):
    """One estimand's verdicts, saturation and items."""

    counts: EstimandCounts
    saturation_sensitivity: tuple[SaturationCount, ...]
    max_other: float
    items: tuple[ComponentItem, ...]


class ComponentSummary(_EstimandSummary, kw_only=True):
    """A (persona, temperature) component with its weight in each order."""

    id: str
    persona: str
    temperature: float
    weight: float
    weight_ba: float


class PlainSummary(_EstimandSummary, kw_only=True):
    """The plain estimand (no persona, the run's temperature)."""

    estimand: str


class MixtureSaturation(JsonRecord):
    """Saturated items: the aggregate's, the plain estimand's, and over the components."""

    aggregate: int
    plain: int
    components_min: int
    components_max: int
    components_mean: float


class MixtureCounts(JsonRecord):
    averaged_away: int
    dispersion_restored: int
    component_verdicts: dict[str, int]
    saturated: MixtureSaturation


class NearDeterministic(JsonRecord):
    """Shares of positions beyond the saturation threshold."""

    threshold: float
    aggregate: float
    plain: float
    families: dict[str, float]


class Distances(JsonRecord):
    """Sorted distances from determinism (Fig. M1)."""

    aggregate: tuple[float, ...]
    plain: tuple[float, ...]
    families: dict[str, tuple[float, ...]]


class MixtureSection(JsonRecord):
    """``results.mixture``."""

    base: str
    order_matched: bool
    n_components: int
    components: tuple[ComponentSummary, ...]
    plain: PlainSummary
    items: tuple[ItemDiagnostics, ...]
    counts: MixtureCounts
    near_deterministic: NearDeterministic
    distances: Distances

    def cdf_rows(self) -> list[dict[str, str | float]]:
        """Fig. M1's data: one CDF per curve (aggregate, plain estimand, each family)."""
        d = self.distances
        curves = [("aggregate", d.aggregate), ("plain", d.plain), *d.families.items()]
        return [
            {"curve": name, "d": x, "cdf": (i + 1) / len(values)}
            for name, values in curves
            for i, x in enumerate(values)
        ]
