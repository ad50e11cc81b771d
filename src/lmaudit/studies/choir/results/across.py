"""The results across questions: the summary counts, the width bins, recoverability, profile
leakage, cue stripping, the echo calibration, the codebook metric's sensitivity, the condition
contrasts and novelty against width."""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated

from lmaudit.results import OMIT_NONE, Interval, JsonRecord
from lmaudit.studies.choir.results.question import ContrastEnds


class AcrossQuestions(JsonRecord):
    """Counts, shares and means over the bank's questions (cue-stripped prompts left out)."""

    n_questions: int
    n_stc: int
    above_chance: int
    above_chance_significant: int
    n_template_novelty: int
    novelty_over_half: int
    n_lift: int
    lift_up: int
    mean_relative_lift: float | None
    salience_tied_share: float | None
    echo_calibrated_threshold: float | None
    mean_echo_seed: float | None
    mean_echo_calibrated: float | None
    mean_echo_lexical: float | None
    above_chance_share: float | None
    lift_up_share: float | None
    lift_low_width: float | None
    lift_high_width: float | None
    recover_excess_gap: float | None
    recover_model_minus_persona: float | None
    above_chance_ranking_shuffle: int
    above_chance_significant_ranking_shuffle: int
    n_codebook_test: int
    codebook_reject: int
    codebook_reject_001: int
    n_degenerate_items: int

    @property
    def above_chance_of_all(self) -> float | None:
        """The share of questions with above-chance agreement over every question analysed: a
        question without a signal-to-chance counts against (None: no question)."""
        return self.above_chance / self.n_questions if self.n_questions else None

    def numbers(self) -> dict[str, float]:
        """Every number of the summary (None left out), as floats."""
        out: dict[str, float] = {}
        for f in fields(self):
            x = getattr(self, f.name)
            if x is not None:
                out[f.name] = float(x)
        return out


class BinMean(JsonRecord):
    """A width bin's mean of one quantity and its bootstrap interval."""

    mean: float
    ci: Interval


class WidthBin(JsonRecord):
    """The questions whose width ``W_q`` lies in ``[lo, hi)`` (``hi`` None: unbounded)."""

    lo: float
    hi: float | None
    n: int
    unconditioned_rbo: BinMean | None
    same_persona_rbo: BinMean | None
    stc: BinMean | None
    relative_lift: BinMean | None


class Recovery(JsonRecord, kw_only=True):
    """Recovering a label (member, persona) from cells' nearest cells: accuracy, its interval,
    chance and the label-shuffle null."""

    accuracy: float
    ci: Interval | tuple[None, None]  # no bootstrap drawn (n_boot = 0): [null, null]
    chance: float
    null_mean: float | None
    null_band: Interval | tuple[None, None]  # no null drawn (n_null = 0): [null, null]
    p: float | None
    n_cells: int
    per_stratum: dict[str, float]
    per_model: Annotated[dict[str, float] | None, OMIT_NONE] = None

    @property
    def interval(self) -> Interval | None:
        """The bootstrap interval of the accuracy (None: no bootstrap drawn)."""
        return self.ci if isinstance(self.ci, Interval) else None

    @property
    def null_interval(self) -> Interval | None:
        """The central band of the label-shuffle null (None: no null drawn)."""
        return self.null_band if isinstance(self.null_band, Interval) else None

    @property
    def excess(self) -> float | None:
        """Accuracy above the label-shuffle null mean (None: no null)."""
        return self.accuracy - self.null_mean if self.null_mean is not None else None


class Spearman(JsonRecord):
    rho: float | None
    p: float | None
    n: int


class StrippingRun(JsonRecord):
    """Recoverability with the items most similar to their profile stripped."""

    threshold_similarity: float
    kept_share: float | None
    model_accuracy: float | None
    model_ci: Interval | None
    persona_within_model_loqo_accuracy: float | None
    persona_within_model_loqo_ci: Interval | None
    persona_within_model_loqo_chance: float | None
    persona_within_model_loqo_above_chance: bool | None


class Leakage(JsonRecord):
    """Profile leakage per question and member, its correlation with lift and recoverability,
    and the stripping re-runs."""

    measure: str
    question_leakage: dict[str, float]
    model_leakage: dict[str, float]
    question_spearman: Spearman | None
    model_spearman: Spearman | None
    stripping: tuple[StrippingRun, ...]


class CueView(JsonRecord):
    """A cue pair's prompt (original or stripped) as the table shows it."""

    item_echo: float | None
    item_echo_calibrated: float | None
    item_echo_lexical: float | None
    cluster_echo: float | None
    rbo: float | None
    stc: float | None
    echo_rate: float | None


class CuePair(JsonRecord):
    """A prompt and its cue-stripped twin, and which quantities fell."""

    original: str
    stripped: str
    anchors: tuple[str, ...]
    before: CueView
    after: CueView
    item_echo_lower: bool | None
    item_echo_calibrated_lower: bool | None
    item_echo_lexical_lower: bool | None
    cluster_echo_lower: bool | None
    rbo_lower: bool | None
    stc_lower: bool | None


class YesOf(JsonRecord):
    yes: int
    n: int


class CueStripping(JsonRecord):
    pairs: tuple[CuePair, ...]
    counts: dict[str, YesOf]  # "<quantity>_lower" -> pairs where it fell, of those with both


class Rates(JsonRecord):
    tpr: float
    fpr: float


class EchoCalibration(JsonRecord):
    """The embedder's echo threshold, calibrated on the shipped set (Youden's J)."""

    set: str
    set_sha256: str
    n_echo: int
    n_plain: int
    seed_threshold: float
    threshold: float
    youden_j: float
    at_seed: Rates
    at_calibrated: Rates


class MetricMeans(JsonRecord):
    mean_C_q: float | None
    mean_R_q: float | None
    mean_width: float | None


class CodebookMetricSensitivity(JsonRecord):
    """Mean ``C_q``, ``R_q``, ``W_q`` per codebook metric over the questions."""

    primary: str
    epsilon: float
    n_questions: int
    cosine: MetricMeans
    euclidean: MetricMeans
    n_C_q_differs: int


class ContrastSummary(ContrastEnds):
    """A contrast's mean within-member RBO and ``R_q`` change over the questions that have it."""

    n_questions: int
    within_member_rbo: float | None
    R_q_change: float | None
    R_q_up: int


class ConditionSummary(JsonRecord):
    R_q: dict[str, float | None]
    template: tuple[ContrastSummary, ...] | None
    temperature: tuple[ContrastSummary, ...] | None


class NoveltyBin(JsonRecord):
    lo: float
    hi: float | None
    n: int
    mean_share: float | None
    over_half: int


class NoveltyByWidth(JsonRecord):
    """The depth-pressure template's novel share against the width: Spearman's rho and bins."""

    spearman: Spearman | None
    bins: tuple[NoveltyBin, ...]
