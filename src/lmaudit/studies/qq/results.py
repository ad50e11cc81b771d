"""The QQ study's typed results: the body of ``results.json`` as frozen dataclasses.

Every shape the study writes is one :class:`QQResults`: a log-prob or sampled run (the sampled
estimand adds ``sampling_error``), a run with items left out (``excluded``), a mixture run
(``mixture``), gates that did not run. Each key of the JSON is a field; the quantities derived
from others (``oss``, ``gamma``, ``d`` ...) are computed once, by the analysis, when it builds
the record, and read back as they were written. Sections with their own procedure live beside
it: the items (:mod:`.item_results`), the parameters (:mod:`.params`), the across-item summary (:mod:`.summary`), the diagnostics
(:mod:`.diagnostics`), the sampling region (:mod:`.sampling_error`), the gates (:mod:`.gates`),
the mixture section (:mod:`.mixture.section`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from lmaudit.results import OMIT_NONE, JsonRecord
from lmaudit.studies.envelope import StudyResults
from lmaudit.studies.qq.diagnostics import FitResult, MemorizationResult, SampledInterval, SaturationCount
from lmaudit.studies.qq.gates import G2Gate, Gates
from lmaudit.studies.qq.item_results import (
    Cell,
    ItemResult,
    Joint,
    LabelEffect,
    MappingResult,
    PositionEstimate,
)
from lmaudit.studies.qq.mixture.section import EstimandCounts, MixtureSection
from lmaudit.studies.qq.params import QQParams
from lmaudit.studies.qq.sampling_error import SamplingRegion
from lmaudit.studies.qq.summary import AcrossItems

__all__ = [
    "Cell",
    "Counts",
    "ExcludedItem",
    "ItemResult",
    "Joint",
    "LabelEffect",
    "MappingResult",
    "Mass",
    "PositionEstimate",
    "QQResults",
    "Saturation",
    "SaturationCount",
    "UndefinedPosition",
]

UNDEFINED_REASON = "no probability on either label (p_y = p_n = 0): P(y | y or n) is undefined"


class UndefinedPosition(JsonRecord):
    """A position where neither label has any probability."""

    mapping: str
    order: str
    position: int
    first_answer: str | None


class ExcludedItem(JsonRecord, kw_only=True):
    """An item left out of the verdicts: at its ``undefined`` positions neither label has any
    probability (``p_y = p_n = 0``: a label absent from a server's top alternatives, or no
    sampled draw on either label), so ``P(y | y or n)`` and the item's ``q``, OE and Γ are
    undefined. Its mass still counts for gate G2."""

    item: str
    stratum: str
    reason: str = UNDEFINED_REASON
    undefined: tuple[UndefinedPosition, ...]
    max_other: float  # over every measured position of the item


class Counts(EstimandCounts):
    """Items per verdict and Γ class, saturated items (as for every estimand), and items left
    out (when any)."""

    excluded: Annotated[int | None, OMIT_NONE] = None


class Saturation(JsonRecord):
    """Saturated items at the study's threshold and at each sensitivity threshold."""

    threshold: float
    n_saturated: int
    n_items: int
    sensitivity: tuple[SaturationCount, ...]


class Mass(JsonRecord):
    """The largest unassigned mass at any measured position against gate G2's threshold."""

    max_other: float
    g2_max_other: float
    g2_pass: bool
    max_envelope_width: float

    def gate(self) -> G2Gate:
        """Gate G2 as the gates section records it."""
        status = "PASS" if self.g2_pass else "FAIL"
        return G2Gate(status, self.max_other, self.g2_max_other, self.max_envelope_width)


class QQResults(StudyResults, kw_only=True):
    """A QQ run's results (``results.json``)."""

    study: str = "qq"
    params: QQParams
    n_items: int
    counts: Counts
    # "summary" in the JSON; the name summary() is the console line, as for every study
    across_items: Annotated[AcrossItems, Field(alias="summary")]
    saturation: Saturation
    mass: Mass
    memorization: MemorizationResult | None
    fits: tuple[FitResult, ...]
    items: tuple[ItemResult, ...]  # in order of first appearance in the input
    excluded: Annotated[tuple[ExcludedItem, ...] | None, OMIT_NONE] = None
    sampled: tuple[SampledInterval, ...]
    sampling_error: Annotated[SamplingRegion | None, OMIT_NONE] = None
    gates: Gates
    mixture: Annotated[MixtureSection | None, OMIT_NONE] = None

    # --- derived -----------------------------------------------------------------------

    def item(self, item_id: str) -> ItemResult:
        for r in self.items:
            if r.item == item_id:
                return r
        raise KeyError(f"no item {item_id!r} in the results")

    @property
    def share_violated(self) -> float:
        """The share of items whose QQ verdict is VIOLATED (nan: no item)."""
        return self.counts.verdict["VIOLATED"] / self.n_items if self.n_items else float("nan")

    def positions(self) -> list[tuple[ItemResult, MappingResult, Cell, PositionEstimate]]:
        """Every measured position of every item, with its item, mapping and cell."""
        return [(it, m, c, p) for it in self.items for m in it.mappings for c in m.cells for p in c.positions]

    def headline(self) -> float:
        """The share of items whose QQ verdict is VIOLATED (returned to Hydra sweepers)."""
        return self.share_violated
