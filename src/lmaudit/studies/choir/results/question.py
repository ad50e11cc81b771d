"""One question's results (``results.json``'s ``questions.<id>``): its codebook and salience
table, agreement and signal-to-chance, persona lift, echo, the codebook test and its cells."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from lmaudit.results import OMIT_NONE, JsonRecord

# a salience row: concept, group (or cell) index, Smith's S, lists naming the concept
SalienceRow = tuple[int, int, float, int]


class Group(JsonRecord):
    """A member x condition group of a question's salience table."""

    model: str
    condition: str
    n_lists: int


class CodebookEntry(JsonRecord):
    """A concept of a question's codebook: its label and the phrases it holds (with counts)."""

    concept: int
    label: str
    clustered: bool
    phrases: dict[str, int]


class SalienceTable(JsonRecord):
    """Smith's S per concept and member x condition group (``rows``, headed by ``columns``)."""

    groups: tuple[Group, ...]
    columns: tuple[str, ...]
    rows: tuple[SalienceRow, ...]
    codebook: tuple[CodebookEntry, ...]


class Cell(JsonRecord):
    """A member x condition x temperature cell."""

    model: str
    condition: str
    temperature: float
    n_lists: int


class ContrastEnds(JsonRecord):
    """What a contrast compares: two templates, or two temperatures (``from`` and ``to``)."""

    from_: Annotated[str | float, Field(alias="from")]
    to: str | float


class Contrast(ContrastEnds):
    """One question's contrast between two templates (or temperatures)."""

    within_member_rbo: float | None
    within_member_rbo_per_member: dict[str, float | None]
    R_q_change: float | None
    n_cells: int


class ConditionBlock(JsonRecord):
    """A question's per-cell salience and agreement, and its template and temperature contrasts."""

    cells: tuple[Cell, ...]
    columns: tuple[str, ...]
    salience: tuple[SalienceRow, ...]
    R_q: dict[str, float | None]  # "<condition>@<temperature>" -> mean pairwise RBO
    template: tuple[Contrast, ...] | None
    temperature: tuple[Contrast, ...] | None


class LiftBaseline(JsonRecord):
    """The persona template's unconditioned agreement the lift is measured against."""

    template: str
    rbo: float | None
    n_lists: int
    n_lists_conditioned: int


class PooledLift(JsonRecord):
    """The lift against the pooled unconditioned ``R_q``."""

    rbo: float
    absolute: float
    relative: float | None


class Lift(JsonRecord):
    """Absolute and relative persona lift (like for like), and against the pooled ``R_q``."""

    absolute: float | None
    relative: float | None
    baseline: LiftBaseline
    pooled: PooledLift | None


class MetricRow(JsonRecord):
    """``C_q``, ``R_q`` and ``W_q`` of one codebook."""

    C_q: int
    R_q: float | None
    width: float | None


class MetricSensitivity(JsonRecord):
    """A question's ``C_q``, ``R_q``, ``W_q`` under both codebook metrics."""

    primary: str
    cosine: MetricRow
    euclidean: MetricRow


class SignalToChance(JsonRecord):
    """Observed agreement against its null (``null``: reassignment | ranking_shuffle)."""

    observed: float
    null_mean: float
    ratio: float | None
    p: float
    null: str

    @property
    def above_chance(self) -> bool:
        return self.ratio is not None and self.ratio > 1.0


class TemplateNovelty(JsonRecord):
    """The depth-pressure template's concepts that no baseline-template list names."""

    baseline: str
    template: str
    n_concepts: int
    n_novel: int
    share: float


class EchoRate(JsonRecord):
    """Items echoing a vocabulary: by embedding (with its ``threshold``) or lexically."""

    rate: float
    n_echo: int
    n: int
    threshold: Annotated[float | None, OMIT_NONE] = None


class Echo(JsonRecord):
    """A question's echo at the seed's and the calibrated threshold, and lexically."""

    seed: EchoRate | None
    calibrated: EchoRate | None
    lexical: EchoRate | None

    def rate(self, rule: str) -> float | None:
        """The rate at ``rule`` (seed | calibrated | lexical); None without one."""
        e: EchoRate | None = getattr(self, rule)
        return e.rate if e is not None else None


class CodebookTest(JsonRecord):
    """The permutation test of the member-cluster association."""

    chi2: float
    cramers_v: float
    p: float


class AnchorEcho(JsonRecord):
    """A cue-paired prompt's anchor echo: items and clusters at the seed's threshold, items at
    the calibrated one and lexically."""

    anchors: tuple[str, ...]
    items: EchoRate | None
    clusters: EchoRate | None
    items_calibrated: EchoRate | None
    items_lexical: EchoRate | None


class SalienceTies(JsonRecord):
    """The share of ranked concepts in an exact salience tie, and ``R_q`` under the tie rule."""

    tied_share: float | None
    R_q_tie_rule: float | None


class QuestionResult(JsonRecord, kw_only=True):
    """One question's results."""

    n_models: int
    n_models_unconditioned: int
    n_models_per_persona: dict[str, int]
    n_lists: int
    n_items: int
    n_concepts: int
    n_clusters: int
    n_noise_items: int
    C_q: int
    R_q: float | None
    width: float | None
    same_persona_rbo: dict[str, float | None]
    same_persona_rbo_mean: float | None
    lift: Lift | None
    metric_sensitivity: Annotated[MetricSensitivity | None, OMIT_NONE] = None
    stc: SignalToChance | None
    stc_ranking_shuffle: SignalToChance | None
    template_novelty: TemplateNovelty | None
    echo: Echo | None
    echo_rate: float | None
    codebook_test: CodebookTest | None
    anchor_echo: Annotated[AnchorEcho | None, OMIT_NONE] = None
    top_concepts: dict[str, tuple[str, ...]]
    salience: SalienceTable
    conditions: ConditionBlock
    salience_ties: SalienceTies
    stripped_of: Annotated[str | None, OMIT_NONE] = None  # a cue pair's stripped prompt: its original

    @property
    def relative_lift(self) -> float | None:
        return self.lift.relative if self.lift else None

    @property
    def stc_ratio(self) -> float | None:
        return self.stc.ratio if self.stc else None
