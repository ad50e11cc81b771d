"""The sections of the judge's typed results that every run has: validity, condition
summaries, the disagreement comparisons, the classification and the wrapper patterns, the
per-prompt grid, model wins and the log-prob readout (and the records they share:
:class:`ExactInterval`, :class:`NotEvaluable`). :mod:`.results` assembles them."""

from __future__ import annotations

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


class ExactInterval(JsonRecord):
    """A proportion's interval at level ``1 - alpha`` (Clopper-Pearson unless ``method`` says)."""

    low: float
    high: float
    alpha: float
    method: str

    @property
    def interval(self) -> Interval:
        return Interval(self.low, self.high)


class NotEvaluable(JsonRecord):
    """A section this run cannot compute, and why."""

    evaluable: Literal[False]
    reason: str


# --- validity and condition summaries --------------------------------------------------


class ValidityCounts(JsonRecord, kw_only=True):
    judgments: int
    valid: int
    invalid: int
    attempts: int
    retries: int
    recovered_by_retry: int


class ConditionValidity(ValidityCounts, kw_only=True):
    errors: dict[str, int]  # why outputs were invalid -> how many


class Validity(ValidityCounts, kw_only=True):
    by_condition: dict[str, ConditionValidity]

    def top_errors(self, n: int = 3) -> list[tuple[str, int]]:
        """The ``n`` most frequent reasons for an invalid output over every condition."""
        errors: dict[str, int] = {}
        for v in self.by_condition.values():
            for e, k in v.errors.items():
                errors[e] = errors.get(e, 0) + k
        return sorted(errors.items(), key=lambda x: (-x[1], x[0]))[:n]


class LabelCounts(JsonRecord):
    """Verdicts per label in the original orientation, and invalid ones."""

    A: int
    B: int
    TIE: int
    INVALID: int

    @property
    def valid(self) -> int:
        return self.A + self.B + self.TIE


class Confidence(JsonRecord):
    """Self-reported confidence over a condition's valid verdicts."""

    n: int
    mean: float | None
    median: float | None
    values: tuple[float, ...]


class ConditionSummary(JsonRecord):
    counts: LabelCounts
    n_judgments: int
    confidence: Confidence


# --- disagreement ----------------------------------------------------------------------


class ItemChange(JsonRecord):
    changed: int
    n: int


class SignTest(JsonRecord):
    """The exact sign test of the ordinal shift A > TIE > B against the reference."""

    toward_A: int
    toward_B: int
    p: float
    method: str


class Disagreement(JsonRecord, kw_only=True):
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


class Comparison(Disagreement, kw_only=True):
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


class Classification(JsonRecord, kw_only=True):
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


class PatternRoles(JsonRecord):
    PA: str
    PB: str


class Pattern(JsonRecord):
    count: int
    prompts: tuple[str, ...]
    per_item: dict[str, int]


class Patterns(JsonRecord, kw_only=True):
    """Primary endpoints 4 and 5: the attraction and aversion patterns on PA and PB."""

    evaluable: Literal[True]
    roles: PatternRoles
    n: int
    n_both_decisive: int
    excluded_invalid: int
    attraction: Pattern
    aversion: Pattern


class ItemRow(JsonRecord, kw_only=True):
    """One prompt's winner labels and confidences per condition, in replicate order (``None``:
    invalid or not judged), and its class per replicate where classified."""

    item: str
    labels: dict[str, tuple[str | None, ...]]
    confidence: dict[str, tuple[float | None, ...]]
    classification: Annotated[tuple[str, ...] | None, OMIT_NONE] = None


# --- model wins ------------------------------------------------------------------------


class Wins(JsonRecord):
    wins: dict[str, int]  # model -> verdicts won
    TIE: int


class ModelWins(JsonRecord, kw_only=True):
    """Wins per model after unblinding and the ranking per condition (tied models grouped)."""

    evaluable: Literal[True]
    models: tuple[str, ...]
    by_condition: dict[str, Wins]
    ranking: dict[str, tuple[tuple[str, ...], ...]]
    ranking_compared: tuple[str, ...]
    ranking_changes: bool | None  # None: the reference was not judged


# --- log-prob readout ------------------------------------------------------------------


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


class OffLabels(JsonRecord):
    """Probability mass off the three labels: mean and max over prompts."""

    mean: float
    max: float


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


class Readout(JsonRecord, kw_only=True):
    n_items: int
    mean: LabelProbs
    other: OffLabels
    items: dict[str, LabelProbs]
    shift_vs_reference: Annotated[Shift | None, OMIT_NONE] = None


# --- every endpoint ----------------------------------------------------------------------


class Endpoints(JsonRecord, kw_only=True):
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
