"""The typed sections imported eval logs (inspect_ai, lm-eval) add to a study's results: what
the logs get wrong (``log_audit``, built by :mod:`lmaudit.interop.audit`, in the draws and
choir results) and the error bars of their scores (``error_bars``, :mod:`lmaudit.interop.scores`,
in the draws results)."""

from __future__ import annotations

from typing import Annotated, Any

from lmaudit.results import OMIT_NONE, JsonRecord

__all__ = [
    "EpochsPersist",
    "ErrorBar",
    "LogAudit",
    "LogFamily",
    "LogFile",
    "LogIssue",
    "LogSource",
    "NormaliseRule",
    "ReportedScore",
]


class NormaliseRule(JsonRecord):
    """How a completion became a categorical answer (``study.normalise``)."""

    kind: str
    pattern: str | None
    labels: tuple[str, ...]
    case_sensitive: bool


class LogSource(JsonRecord):
    """Which log: its files, and the family and source its answers were read as."""

    files: tuple[str, ...]
    family: str
    source: str


class LogFile(LogSource):
    """One log file as read: its settings (``facts``), what was kept, its issue codes."""

    facts: dict[str, Any]  # free-form: the settings each tool's log records, copied as read
    counts: dict[str, int]
    issues: tuple[str, ...]


class LogFamily(JsonRecord):
    sources: tuple[str, ...]
    temperature: tuple[str, ...]
    greedy: bool
    issues: dict[str, int]


class LogIssue(LogSource, kw_only=True):
    """One issue of one log file: how many answers, what was done, what it means."""

    issue: str
    count: int
    action: str
    detail: Annotated[str | None, OMIT_NONE] = None


class LogAudit(JsonRecord):
    """What the imported logs get wrong (:mod:`lmaudit.interop.audit`)."""

    format: str
    normalise: NormaliseRule | None
    files: tuple[LogFile, ...]
    families: dict[str, LogFamily]
    issues: tuple[LogIssue, ...]
    totals: dict[str, int]
    n_excluded: int
    greedy_families: tuple[str, ...]
    unidentified_families: tuple[str, ...]

    @property
    def draws_read(self) -> int:
        """Answers the logs hold, kept or not."""
        return sum(int(f.counts.get("draws_read", 0)) for f in self.files)


class ReportedScore(JsonRecord):
    """What one log reports of its score (:mod:`lmaudit.interop.scores`)."""

    files: tuple[str, ...]
    accuracy: float | None
    stderr: float | None
    over: str
    reducer: str | None


class EpochsPersist(JsonRecord):
    """Beside an error bar, this study's question: do the model's epochs persist?"""

    reject: bool
    holm_p: float
    rho_hat: float | None
    rho_upper_label: str


class ErrorBar(JsonRecord, kw_only=True):
    """The mean of a model's scores on a task with its naive and sample-clustered standard
    errors, and the stderr the log reports."""

    format: str
    scorer: str
    n: int
    clusters: int
    accuracy: float
    binary: bool
    se_naive: float | None
    se_clustered: float
    design_effect: float | None
    icc: float | None
    log_stderr: float | None
    log_accuracy: float | None
    logs: tuple[ReportedScore, ...]
    sentence: str
    epochs_persist: EpochsPersist | None

    @property
    def clustered_over_log(self) -> float | None:
        """The clustered standard error over the log's own (None: the log reports none, or 0)."""
        return self.se_clustered / self.log_stderr if self.log_stderr else None
