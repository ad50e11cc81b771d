"""The sections of the judge's typed results that every run has: validity, condition
summaries, the disagreement comparisons, the classification and the wrapper patterns, the
per-prompt grid, model wins and the log-prob readout (and the records they share:
:class:`ExactInterval`, :class:`NotEvaluable`). :mod:`.results` assembles them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Generic, Literal, TypeVar

from lmaudit.results import OMIT_NONE, Interval, JsonRecord

__all__ = [
    "LABELS",
    "Classification",
    "Comparison",
    "ConditionSummary",
    "ConditionValidity",
    "Confidence",
    "Disagreement",
    "Endpoints",
    "ExactInterval",
    "ItemChange",
    "ItemRow",
    "LabelCounts",
    "LabelIntervals",
    "LabelPValues",
    "LabelProbs",
    "ModelWins",
    "NotEvaluable",
    "OffLabels",
    "Pattern",
    "PatternRoles",
    "Patterns",
    "PerLabel",
    "Readout",
    "Shift",
    "SignTest",
    "Validity",
    "Wins",
]

LABELS = ("A", "B", "TIE")

T = TypeVar("T")


@dataclass(frozen=True)
class ExactInterval(JsonRecord):
    """A proportion's interval at level ``1 - alpha`` (Clopper-Pearson unless ``method`` says)."""

    low: float
    high: float
    alpha: float
    method: str

    @property
    def interval(self) -> Interval:
        return Interval(self.low, self.high)


@dataclass(frozen=True)
class NotEvaluable(JsonRecord):
    """A section this run cannot compute, and why."""

    evaluable: Literal[False]
    reason: str


# --- validity and condition summaries --------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ValidityCounts(JsonRecord):
    judgments: int
    valid: int
    invalid: int
    attempts: int
    retries: int
    recovered_by_retry: int


@dataclass(frozen=True, kw_only=True)
class ConditionValidity(ValidityCounts):
    errors: dict[str, int]  # why outputs were invalid -> how many


@dataclass(frozen=True, kw_only=True)
class Validity(ValidityCounts):
    by_condition: dict[str, ConditionValidity]

    def top_errors(self, n: int = 3) -> list[tuple[str, int]]:
        """The ``n`` most frequent reasons for an invalid output over every condition."""
        errors: dict[str, int] = {}
        for v in self.by_condition.values():
            for e, k in v.errors.items():
                errors[e] = errors.get(e, 0) + k
        return sorted(errors.items(), key=lambda x: (-x[1], x[0]))[:n]


@dataclass(frozen=True)
class LabelCounts(JsonRecord):
    """Verdicts per label in the original orientation, and invalid ones."""

    A: int
    B: int
    TIE: int
    INVALID: int

    @property
    def valid(self) -> int:
        return self.A + self.B + self.TIE


@dataclass(frozen=True)
class Confidence(JsonRecord):
    """Self-reported confidence over a condition's valid verdicts."""

    n: int
    mean: float | None
    median: float | None
    values: tuple[float, ...]


@dataclass(frozen=True)
class ConditionSummary(JsonRecord):
    counts: LabelCounts
    n_judgments: int
    confidence: Confidence


# --- disagreement ----------------------------------------------------------------------


@dataclass(frozen=True)
class ItemChange(JsonRecord):
    changed: int
    n: int


@dataclass(frozen=True)
class SignTest(JsonRecord):
    """The exact sign test of the ordinal shift A > TIE > B against the reference."""

    toward_A: int
    toward_B: int
    p: float
    method: str


@dataclass(frozen=True, kw_only=True)
class Disagreement(JsonRecord):
    """Winner-label disagreement over replicate-paired judgments: the changed pairs with their
    exact interval, the pairs left out as invalid, and the exact sign test of the shift."""

    changed: int
    n: int
    rate: float | None
    ci: ExactInterval
    excluded_invalid: int
    changed_prompts: tuple[str, ...]
    per_item: dict[str, ItemChange]
    sign_test: SignTest


@dataclass(frozen=True, kw_only=True)
class Comparison(Disagreement):
    """A condition's winner labels against the reference's, replicate by replicate (or the
    reference against itself, replicate r against r + 1: ``repeat_pairs``)."""

    id: str
    comparison: str
    condition: str
    reference: str
    repeat_pairs: Annotated[tuple[tuple[int, int], ...] | None, OMIT_NONE] = None

    @property
    def is_repeat(self) -> bool:
        """The repeat baseline (the reference against itself), not a change of presentation."""
        return self.repeat_pairs is not None


# --- classification and patterns -------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Classification(JsonRecord):
    """The seed's per-prompt classes, counted over (prompt, replicate) pairs; ``counts`` and
    ``by_replicate`` only when the conditions play P0, PA, PB and PAB."""

    evaluable: bool
    roles: dict[str, str]  # role (P0, PA, PB, PAB) -> condition id
    order: tuple[str, ...]
    counts: Annotated[dict[str, int] | None, OMIT_NONE] = None
    by_replicate: Annotated[tuple[dict[str, int], ...] | None, OMIT_NONE] = None

    @property
    def unclassified(self) -> int:
        return (self.counts or {}).get("NOT_CLASSIFIABLE", 0)

    @property
    def classified(self) -> int:
        return sum(n for c, n in (self.counts or {}).items() if c != "NOT_CLASSIFIABLE")


@dataclass(frozen=True)
class PatternRoles(JsonRecord):
    PA: str
    PB: str


@dataclass(frozen=True)
class Pattern(JsonRecord):
    count: int
    prompts: tuple[str, ...]
    per_item: dict[str, int]


@dataclass(frozen=True, kw_only=True)
class Patterns(JsonRecord):
    """Primary endpoints 4 and 5: the attraction and aversion patterns on PA and PB."""

    evaluable: Literal[True]
    roles: PatternRoles
    n: int
    n_both_decisive: int
    excluded_invalid: int
    attraction: Pattern
    aversion: Pattern


@dataclass(frozen=True, kw_only=True)
class ItemRow(JsonRecord):
    """One prompt's winner labels and confidences per condition, in replicate order (``None``:
    invalid or not judged), and its class per replicate where classified."""

    item: str
    labels: dict[str, tuple[str | None, ...]]
    confidence: dict[str, tuple[float | None, ...]]
    classification: Annotated[tuple[str, ...] | None, OMIT_NONE] = None


# --- model wins ------------------------------------------------------------------------


@dataclass(frozen=True)
class Wins(JsonRecord):
    wins: dict[str, int]  # model -> verdicts won
    TIE: int


@dataclass(frozen=True, kw_only=True)
class ModelWins(JsonRecord):
    """Wins per model after unblinding and the ranking per condition (tied models grouped)."""

    evaluable: Literal[True]
    models: tuple[str, ...]
    by_condition: dict[str, Wins]
    ranking: dict[str, tuple[tuple[str, ...], ...]]
    ranking_compared: tuple[str, ...]
    ranking_changes: bool | None  # None: the reference was not judged


# --- log-prob readout ------------------------------------------------------------------


@dataclass(frozen=True)
class PerLabel(JsonRecord, Generic[T]):
    """One value per verdict label (:data:`LABELS`), read by label: ``x["TIE"]``."""

    A: T
    B: T
    TIE: T

    def __getitem__(self, label: str) -> T:
        out: T = getattr(self, label)
        return out


LabelProbs = PerLabel[float]
LabelIntervals = PerLabel[Interval | None]
LabelPValues = PerLabel[float | None]


@dataclass(frozen=True)
class OffLabels(JsonRecord):
    """Probability mass off the three labels: mean and max over prompts."""

    mean: float
    max: float


@dataclass(frozen=True)
class Shift(JsonRecord):
    """A condition's mean label probabilities minus the reference's on the same prompts, with
    Student-t intervals over prompts (None where fewer than two prompts or no spread)."""

    mean: LabelProbs
    ci: LabelIntervals
    p: LabelPValues
    n: int
    interval: str
    items: dict[str, LabelProbs]

    def moved(self) -> list[str]:
        """The labels whose interval excludes zero."""
        return [v for v in LABELS if (ci := self.ci[v]) is not None and not ci.contains(0.0)]


@dataclass(frozen=True, kw_only=True)
class Readout(JsonRecord):
    n_items: int
    mean: LabelProbs
    other: OffLabels
    items: dict[str, LabelProbs]
    shift_vs_reference: Annotated[Shift | None, OMIT_NONE] = None


# --- every endpoint ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Endpoints(JsonRecord):
    """Every endpoint of the judge study computed from the final judgments
    (:func:`lmaudit.studies.judge.disagreement.analyze`): the sections every run's
    :class:`~lmaudit.studies.judge.results.JudgeResults` carries."""

    n_prompts: int
    k: int
    conditions_analysed: tuple[str, ...]
    reference: str
    conditions: dict[str, ConditionSummary]
    disagreement: tuple[Comparison, ...]
    classification: Classification
    patterns: Patterns | NotEvaluable
    items: tuple[ItemRow, ...]
    model_wins: ModelWins | NotEvaluable
    readout: dict[str, Readout]
