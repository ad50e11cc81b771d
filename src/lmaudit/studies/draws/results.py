"""The draws study's typed results: the body of ``results.json`` (:class:`DrawsResults`) and
its parts, read back field by field by ``from_json`` (:class:`lmaudit.results.JsonRecord`).

One shape for every mode: sampled draws (``mode`` "sample", the normalisation rule of the
config), imported draws (``mode`` "import"), and imported eval logs (inspect_ai, lm-eval),
which add the ``log_audit`` section and, where the logs scored their samples, ``error_bars``.
A run whose every sequence was excluded has no family (``families`` empty). The logs' sections
and the normalisation rule are in :mod:`lmaudit.interop.sections`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated

from lmaudit.interop.sections import ErrorBar, LogAudit, NormaliseRule
from lmaudit.results import OMIT_NONE, Interval, JsonRecord
from lmaudit.studies.envelope import StudyResults

__all__ = [
    "Column",
    "Data",
    "Deduplicated",
    "DrawsResults",
    "DriftBeyondPersistence",
    "DriftTest",
    "Excluded",
    "Family",
    "FamilyWithoutFlagged",
    "GroupedRow",
    "Holm",
    "HolmRow",
    "Params",
    "PermutationNull",
    "PersistenceTest",
    "Refused",
    "RhoCurve",
    "RhoHatInterval",
    "SourceRow",
]


# --- the persistence test --------------------------------------------------------------------


class DriftTest(JsonRecord):
    """The registered drift test: ``T_drift = sum D`` against the joint permutations."""

    T_drift: float
    p: float


class RhoCurve(JsonRecord):
    """Share of synthetic datasets with ``T_sim <= T`` at each grid ``rho``."""

    rho: tuple[float, ...]
    share_le: tuple[float, ...]


class PermutationNull(JsonRecord):
    """The permutation null of ``T``: its distinct values and how many of the ``B``
    permutations gave each."""

    T: tuple[float, ...]
    count: tuple[int, ...]
    B: int


class RhoHatInterval(JsonRecord, kw_only=True):
    """The percentile bootstrap interval of a family's ``rho_hat`` over prompts (not
    registered); ``low``/``high`` are None, with the ``reason``, below two prompts."""

    low: float | None
    high: float | None
    confidence: float
    method: str
    B: int
    unit: str
    n_prompts: int
    reason: Annotated[str | None, OMIT_NONE] = None

    @property
    def interval(self) -> Interval | None:
        """``[low, high]``, or None when there is no interval."""
        return None if self.low is None or self.high is None else Interval(self.low, self.high)


class PersistenceTest(JsonRecord, kw_only=True):
    """The persistence test of one column (the family, one source, or the family without its
    flagged sources): the sequences and draws read, the repeats ``R`` against their expectation
    ``E0``, the statistic ``T`` with its permutation ``p``, the estimate ``rho_hat`` and the
    bound ``rho_upper``. A :class:`Column` holds it whole; a :class:`SourceRow` of the flat
    table repeats it beside the source's diagnostics."""

    n_sequences: int
    n_informative: int
    n_draws: int
    R: int
    E0: float
    T: float
    p: float
    rho_hat: float | None
    rho_upper: float | None
    rho_upper_label: str


class Column(PersistenceTest, kw_only=True):
    """Every quantity of one column of a family: the family, one source, or the family without
    its flagged sources."""

    n_uninformative: int
    rho_upper_status: str  # bounded | uninformative | below_grid
    # where rho_upper lies; an open end (above or below the grid) is null, so this is a pair
    # of optional ends rather than an Interval
    rho_upper_interval: tuple[float | None, float | None]
    rho_cal: float
    critical_value: float
    power: dict[str, float]  # rho (as written, e.g. "0.05") -> power
    drift: DriftTest
    rho_curve: RhoCurve

    def power_by_rho(self) -> list[tuple[float, float]]:
        """``(rho, power)`` in increasing ``rho``."""
        return sorted((float(r), v) for r, v in self.power.items())


class FamilyWithoutFlagged(Column, kw_only=True):
    """The family without its flagged sources, Holm-corrected across families beside the
    registered result."""

    holm_p: float
    reject: bool


class GroupedRow(JsonRecord):
    """The grouped-sequence diagnostic of one source: fully grouped informative sequences
    (AAABBB) against their exact Poisson-binomial null."""

    source: str
    n_informative: int
    n_grouped: int
    share_grouped: float | None
    expected: float
    expected_share: float | None
    p: float
    flagged: bool


class DriftBeyondPersistence(JsonRecord):
    """Excess drift against datasets simulated at ``rho_cal`` (not registered)."""

    rho: float
    excess: float
    p: float
    null_mean: float
    n_sims: int


class Family(Column, kw_only=True):
    """One family's registered result (the family column) with its sources, the grouped
    diagnostic, and the result without flagged sources."""

    rho_hat_ci: RhoHatInterval
    null: PermutationNull
    n_deduplicated: int
    drift_beyond_persistence: DriftBeyondPersistence
    grouped: tuple[GroupedRow, ...]
    flagged_sources: tuple[str, ...]
    without_flagged: FamilyWithoutFlagged | None
    sources: dict[str, Column]
    holm_p: float
    reject: bool

    @property
    def verdict(self) -> str:
        """ "persistence" or "not rejected", with the bound on ``rho``."""
        return ("persistence" if self.reject else "not rejected") + f" (rho_upper {self.rho_upper_label})"

    @property
    def emptied(self) -> bool:
        """Whether no source is left once the flagged ones are dropped."""
        return self.without_flagged is not None and not self.without_flagged.n_sequences

    @property
    def reject_without_flagged(self) -> bool:
        """The result once flagged sources are dropped (the registered one when none is)."""
        return (self.without_flagged or self).reject


class SourceRow(PersistenceTest, kw_only=True):
    """One row of the flat per-source table: the source's persistence test, its drift test and
    its grouped-sequence diagnostic."""

    family: str
    source: str
    T_drift: float
    drift_p: float
    share_grouped: float | None
    expected_share_grouped: float | None
    grouped_p: float
    flagged: bool


class HolmRow(JsonRecord):
    name: str
    p: float
    holm_p: float
    reject: bool


class Holm(JsonRecord):
    """Holm's correction across families: the registered result and without flagged sources."""

    alpha: float
    registered: tuple[HolmRow, ...]
    without_flagged: tuple[HolmRow, ...]


class Params(JsonRecord):
    """The analysis settings the results were computed with."""

    B: int
    rho_grid: tuple[float, ...]
    sims_per_step: int
    power_rhos: tuple[float, ...]
    alpha: float
    grouped_flag_p: float
    seed: int
    exclude_patterns: tuple[str, ...]


class Excluded(JsonRecord):
    n: int
    by_pattern: dict[str, int]


class Deduplicated(JsonRecord):
    n_dropped: int
    by_family: dict[str, int]


class Refused(JsonRecord):
    """Sampled sequences the server refused a draw of: counted, never analysed."""

    sequences: int = 0
    draws: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # reason -> draws


class Data(JsonRecord):
    """What was read, left out and analysed."""

    records: int
    excluded: Excluded
    deduplicated: Deduplicated
    analysed_sequences: int
    families: tuple[str, ...]
    refused: Refused


# --- the results -------------------------------------------------------------------------------


class DrawsResults(StudyResults, kw_only=True):
    """The draws study's results: per family the registered persistence test, Holm's
    correction across families, a per-source table; for imported logs what they get wrong
    and the error bars of their scores."""

    study: str
    mode: str  # sample | import
    normalise: NormaliseRule | None  # sampled: the config's rule; logs: the rule they were read with
    params: Params
    data: Data
    families: dict[str, Family]
    holm: Holm
    sources: tuple[SourceRow, ...]
    n_families: int
    n_rejected: int
    any_flagged: bool
    log_audit: Annotated[LogAudit | None, OMIT_NONE] = None
    # model -> task -> error bar
    error_bars: Annotated[dict[str, dict[str, ErrorBar]] | None, OMIT_NONE] = None

    @property
    def share_rejected(self) -> float:
        """The share of families whose persistence test rejects after Holm (nan: none)."""
        return self.n_rejected / self.n_families if self.n_families else float("nan")

    @property
    def flagged(self) -> list[tuple[str, str]]:
        """``(family, source)`` of every flagged source."""
        return [(n, s) for n, f in self.families.items() for s in f.flagged_sources]

    def error_bar_entries(self) -> list[tuple[str, str, ErrorBar]]:
        """``(model, task, entry)`` of every error bar, sorted."""
        bars = self.error_bars or {}
        return [(m, t, e) for m, tasks in sorted(bars.items()) for t, e in sorted(tasks.items())]

    def headline(self) -> float:
        """The share of families whose persistence test rejects after Holm's correction."""
        return self.share_rejected
