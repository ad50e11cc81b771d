"""The judge study's typed results: the body of ``results.json`` as frozen dataclasses, read
back checked field by field (:meth:`JudgeResults.from_json`) and written by one ``to_json``.

One class per section. A run lmaudit judged has no ``order_swap`` or ``length`` section; an
import of pairwise verdicts (FastChat, AlpacaEval) has ``order_swap`` and, where its file holds
the answers, ``length``. Sections that need conditions in given roles (``patterns``,
``model_wins``) are either evaluated or :class:`NotEvaluable` with the reason. The views the
pipeline records (headline, metrics, tags, summary) are methods of :class:`JudgeResults`; the
maths behind every number is in :mod:`.analysis` and the modules it calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic.experimental.missing_sentinel import MISSING

from lmaudit.results import OMIT_NONE, Interval, JsonRecord
from lmaudit.studies.envelope import StudyResults
from lmaudit.studies.judge import views

__all__ = [
    "Classification",
    "Comparison",
    "ConditionSummary",
    "Design",
    "ExactInterval",
    "ItemRow",
    "JudgeResults",
    "LabelCounts",
    "LengthSection",
    "ModelWins",
    "NotEvaluable",
    "OrderSwap",
    "PairBlock",
    "Patterns",
    "Randomized",
    "Readout",
    "Validity",
    "WinRates",
]

LABELS = ("A", "B", "TIE")


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


# --- the design ------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeIdentity(JsonRecord):
    """The judge that answered a run lmaudit judged."""

    name: str
    identity_digest: str


@dataclass(frozen=True)
class Deviation(JsonRecord):
    """A deviation from the protocol recorded for the run."""

    id: str
    description: str


@dataclass(frozen=True)
class ConditionSpec(JsonRecord):
    """A condition as judged: which responses it wraps, whether A and B are exchanged."""

    id: str
    wrap: tuple[str, ...]
    swap: bool


@dataclass(frozen=True)
class InputFile(JsonRecord):
    path: str
    sha256: str


@dataclass(frozen=True, kw_only=True)
class Design(JsonRecord):
    """The measurement's design record (what judged, how, from which files) with the
    conditions as analysed and the isolation found on the judgments. Fields a mode does not
    record are absent: a judged run has the judge, seeds and sampling; an import the file(s)
    and the execution record."""

    source: str  # judged | import
    isolation: str | tuple[str, ...]  # one value, or every value the judgments carry
    conditions: tuple[ConditionSpec, ...]
    deviations: Annotated[tuple[Deviation, ...] | None, OMIT_NONE] = None
    # a run lmaudit judged
    judge: Annotated[JudgeIdentity | None, OMIT_NONE] = None
    seed: Annotated[int | None, OMIT_NONE] = None
    seed_rule: Annotated[str | None, OMIT_NONE] = None
    k: Annotated[int | None, OMIT_NONE] = None
    temperature: Annotated[float | None, OMIT_NONE] = None
    top_p: Annotated[float | None, OMIT_NONE] = None
    max_tokens: Annotated[int | None, OMIT_NONE] = None
    max_attempts: Annotated[int | None, OMIT_NONE] = None
    rubric_sha256: Annotated[str | None, OMIT_NONE] = None
    # null in a combined sweep's design (no single plan: job_plan_digests lists each job's)
    plan_digest: str | MISSING | None = MISSING
    job_plan_digests: Annotated[tuple[str, ...] | None, OMIT_NONE] = None  # a combined sweep
    readout: Annotated[str | None, OMIT_NONE] = None
    # an import: lmaudit's own folder, or another tool's file
    import_dir: Annotated[str | None, OMIT_NONE] = None
    import_path: Annotated[str | None, OMIT_NONE] = None
    format: Annotated[str | None, OMIT_NONE] = None
    files: Annotated[dict[str, InputFile] | None, OMIT_NONE] = None
    # the import's execution record, copied as the file (or the reader) gives it: free-form
    execution: Annotated[dict[str, Any] | None, OMIT_NONE] = None
    orders: Annotated[dict[str, str] | None, OMIT_NONE] = None
    # FastChat
    lines: Annotated[int | None, OMIT_NONE] = None
    repeated_lines: Annotated[int | None, OMIT_NONE] = None
    lines_in_one_order: Annotated[int | None, OMIT_NONE] = None
    answers_path: Annotated[str | None, OMIT_NONE] = None
    rows_without_lengths: Annotated[int | None, OMIT_NONE] = None
    # AlpacaEval
    annotations: Annotated[int | None, OMIT_NONE] = None
    identical_outputs_left_out: Annotated[int | None, OMIT_NONE] = None
    pairs_in_both_orders: Annotated[int | None, OMIT_NONE] = None
    pairs_in_one_order: Annotated[int | None, OMIT_NONE] = None

    @property
    def isolation_text(self) -> str:
        """The isolation as one string (several joined by commas)."""
        return self.isolation if isinstance(self.isolation, str) else ",".join(self.isolation)

    def condition(self, cid: str) -> ConditionSpec | None:
        return next((c for c in self.conditions if c.id == cid), None)


@dataclass(frozen=True)
class Params(JsonRecord):
    alpha: float
    reference: str


@dataclass(frozen=True)
class MappingFile(JsonRecord):
    """The hidden model mapping read to unblind the verdicts."""

    path: str


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
class Comparison(JsonRecord):
    """A condition's winner labels against the reference's, replicate by replicate (or the
    reference against itself, replicate r against r + 1: ``repeat_pairs``)."""

    id: str
    comparison: str
    condition: str
    reference: str
    repeat_pairs: Annotated[tuple[tuple[int, int], ...] | None, OMIT_NONE] = None
    changed: int
    n: int
    rate: float | None
    ci: ExactInterval
    excluded_invalid: int
    changed_prompts: tuple[str, ...]
    per_item: dict[str, ItemChange]
    sign_test: SignTest

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
class LabelProbs(JsonRecord):
    A: float
    B: float
    TIE: float

    def __getitem__(self, label: str) -> float:
        return float(getattr(self, label))


@dataclass(frozen=True)
class LabelIntervals(JsonRecord):
    A: Interval | None
    B: Interval | None
    TIE: Interval | None

    def __getitem__(self, label: str) -> Interval | None:
        out: Interval | None = getattr(self, label)
        return out


@dataclass(frozen=True)
class LabelPValues(JsonRecord):
    A: float | None
    B: float | None
    TIE: float | None


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


# --- order swap (imported pairwise verdicts) -------------------------------------------


@dataclass(frozen=True)
class PairCounts(JsonRecord):
    n: int
    consistent: int
    first_both: int
    second_both: int
    one_tie: int
    invalid: int


@dataclass(frozen=True, kw_only=True)
class BinomialReading(JsonRecord):
    """A first-position win rate with its exact interval and two-sided binomial p (1/2)."""

    n: int
    rate: float | None
    ci: ExactInterval
    p: float
    test: str


@dataclass(frozen=True, kw_only=True)
class Flipped(BinomialReading):
    first_both: int


@dataclass(frozen=True, kw_only=True)
class PerVerdict(BinomialReading):
    first: int
    second: int


@dataclass(frozen=True)
class PositionConsistency(JsonRecord):
    consistent: int
    n: int
    rate: float | None
    ci: ExactInterval


@dataclass(frozen=True)
class PreferenceFairness(JsonRecord):
    value: float | None
    primacy: int
    recency: int
    raw: float
    n: int
    invalid: int


@dataclass(frozen=True, kw_only=True)
class PairBlock(JsonRecord):
    """One group of pairs judged in both orders: counts, both readings of the first-position
    win rate, Shi et al.'s position consistency and preference fairness."""

    counts: PairCounts
    flipped: Flipped
    per_verdict: PerVerdict
    position_consistency: PositionConsistency
    preference_fairness: PreferenceFairness


@dataclass(frozen=True)
class Unpaired(JsonRecord):
    order_1_only: int
    order_2_only: int


@dataclass(frozen=True, kw_only=True)
class Randomized(JsonRecord):
    """Pairs judged once, in a recorded random order: first-position wins among the decisive."""

    verdicts: int
    order_1: int
    order_2: int
    ties: int
    invalid: int
    decisive: int
    first_wins: int
    rate: float | None
    p_value: float
    ci: ExactInterval
    test: str
    assumption: str


@dataclass(frozen=True, kw_only=True)
class ModelWinRate(JsonRecord):
    pairs: int
    shown_first_in_order_1: int
    balanced: float
    order_1: float
    order_2: float
    order_1_minus_order_2: float


@dataclass(frozen=True)
class WinRates(JsonRecord):
    """Each model's win rate over pairs valid in both orders: balanced, and each order alone."""

    scoring: str
    pairs: int
    models: dict[str, ModelWinRate]
    ranking: dict[str, tuple[tuple[str, ...], ...]]
    ranking_changes: bool


@dataclass(frozen=True, kw_only=True)
class OrderSwap(PairBlock):
    """Position bias from imported pairs (the overall block, then per judge prompt, model pair
    and turn); ``randomized`` where pairs were judged in one order, ``win_rates`` in both."""

    orders: dict[str, str]
    first_position_win: str
    primary: str
    secondary: str
    alpha: float
    unpaired: Unpaired
    by_judge_prompt: dict[str, PairBlock]
    by_model_pair: dict[str, PairBlock]
    by_turn: dict[str, PairBlock]
    randomized: Annotated[Randomized | None, OMIT_NONE] = None
    win_rates: Annotated[WinRates | None, OMIT_NONE] = None

    def groups(self) -> list[tuple[str, str, dict[str, PairBlock]]]:
        """(metric prefix, the report's heading, blocks by name) for each grouping of pairs."""
        return [
            ("prompt", "judge prompt", self.by_judge_prompt),
            ("turn", "turn", self.by_turn),
            ("pair", "model pair", self.by_model_pair),
        ]


# --- length (imported verdicts whose file holds the answers) ----------------------------


@dataclass(frozen=True, kw_only=True)
class LongerWins(JsonRecord):
    decisive_unequal: int
    equal_length: int
    longer_won: int
    rate: float | None
    p_value: float
    ci: ExactInterval
    test: str


@dataclass(frozen=True, kw_only=True)
class ModelLength(JsonRecord):
    decisive: int
    won: int
    win_rate: float
    evaluable: bool
    reason: Annotated[str | None, OMIT_NONE] = None
    length_controlled: float | None
    slope_per_1000_chars: float | None


@dataclass(frozen=True)
class LengthControlled(JsonRecord):
    model: str
    models: dict[str, ModelLength]


@dataclass(frozen=True)
class LengthSection(JsonRecord):
    verdicts: int
    decisive: int
    primary: str
    longer_wins: dict[str, LongerWins]  # unit (chars, words) -> reading
    length_controlled: LengthControlled


# --- the results -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class JudgeResults(StudyResults):
    """The judge study's results (seed 001): does a content-preserving change of presentation
    flip an LLM judge's pairwise verdicts?"""

    study: Literal["judge"]
    mode: str  # judge | import
    design: Design
    deviations: tuple[Deviation, ...]
    params: Params
    mapping: MappingFile | None
    validity: Validity
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
    order_swap: Annotated[OrderSwap | None, OMIT_NONE] = None
    length: Annotated[LengthSection | None, OMIT_NONE] = None

    # --- derived quantities ---

    @property
    def alpha(self) -> float:
        return self.params.alpha

    @property
    def primary(self) -> tuple[Comparison, ...]:
        """The comparisons of a condition with the reference (not the repeat baseline)."""
        return tuple(d for d in self.disagreement if not d.is_repeat)

    @property
    def repeat(self) -> Comparison | None:
        """The reference against itself (replicate r against r + 1), when k >= 2."""
        return next((d for d in self.disagreement if d.is_repeat), None)

    @property
    def tool_format(self) -> str | None:
        """The other tool whose file the run imported (``fastchat``, ``alpaca_eval``), or None
        for a run lmaudit judged (or an import of lmaudit's own result files)."""
        return (self.design.format or None) if self.mode == "import" else None

    def disagreement_rate(self) -> float:
        """The pooled winner-label disagreement rate of every condition against the reference
        (NaN without a comparison)."""
        n = sum(d.n for d in self.primary)
        return sum(d.changed for d in self.primary) / n if n else float("nan")

    # --- the views the pipeline records (:mod:`.views`) ---

    def headline(self) -> float:
        return self.disagreement_rate()

    def metrics(self) -> dict[str, float]:
        return views.metrics(self)

    def tags(self) -> dict[str, str]:
        return views.tags(self)

    def summary(self) -> str:
        return views.summary(self)
