"""The source-blind ranking's results (appendix D: candidates, each cohort's stages and outcome,
the counts) and the participants' calibration against the cohorts' tops (appendix D.1)."""

from __future__ import annotations

from typing import Annotated, Any

from lmaudit.results import OMIT_NONE, JsonRecord


class Candidate(JsonRecord):
    id: str
    text: str
    pool: str
    source: str  # conditioned | unconditioned
    family: str


class BordaRow(JsonRecord):
    id: str
    family: str
    points: int


class Stage1(JsonRecord):
    """A cohort's stage-1 Borda and its leader (no valid ballot: no leader, no points)."""

    n_valid: int
    n_ballots: int
    leader: Candidate | None
    top_family: str | None
    tie: bool
    top_points: Annotated[int | None, OMIT_NONE] = None
    pool_points_per_ballot: Annotated[dict[str, float] | None, OMIT_NONE] = None
    borda: Annotated[tuple[BordaRow, ...] | None, OMIT_NONE] = None


class Stage2(JsonRecord):
    """A cohort's stage-2 ballots over the pools' finalist sets."""

    n_ballots: int
    n_valid: int
    finalists: dict[str, tuple[str, ...]]
    set_points: dict[str, int]
    set_firsts: dict[str, int]


class Cohort(JsonRecord, kw_only=True):
    """A cohort that decided nothing on a question (no valid ballot of the deciding stage)."""

    stage1: Stage1
    stage2: Stage2 | None
    decided_by: str | None  # finalists | stage1 | None
    advanced_pool: str | None
    advanced_source: str | None
    tie: bool


class CohortDecided(Cohort, kw_only=True):
    """A cohort that decided: its advanced pool (a tie: none) and its top candidate."""

    tied_pools: Annotated[tuple[str, ...] | None, OMIT_NONE] = None  # the finalist stage's
    top: Candidate | None
    top_status: str


class Cohorts(JsonRecord):
    conditioned: CohortDecided | Cohort
    unconditioned: CohortDecided | Cohort

    def __getitem__(self, cohort: str) -> CohortDecided | Cohort:
        c: CohortDecided | Cohort = getattr(self, cohort)
        return c


class PoolDraw(JsonRecord):
    members: int
    eligible: int
    drawn: tuple[str, ...]


class RankingQuestion(JsonRecord, kw_only=True):
    """One question's ranking: its candidates, each cohort's outcome and whether they agree
    (a question with a pool record and no ballot: pools only)."""

    n_candidates: int
    candidates: Annotated[tuple[Candidate, ...] | None, OMIT_NONE] = None
    cohorts: Cohorts | None
    agree_top: bool | None
    agree_family: bool | None
    pools: Annotated[dict[str, PoolDraw] | None, OMIT_NONE] = None


class Count(JsonRecord, kw_only=True):
    """``count`` of ``n`` (``share``: None when ``n`` is 0)."""

    count: int
    n: int
    share: float | None
    ties: Annotated[int | None, OMIT_NONE] = None

    @property
    def fraction(self) -> str:
        return f"{self.count}/{self.n}"


class CohortCount(Count, kw_only=True):
    decided_by: dict[str, int]


class StageCount(JsonRecord):
    n_ballots: int
    n_invalid: int


class ByStage(JsonRecord):
    stage1: StageCount
    stage2: StageCount


class RankingSummary(JsonRecord):
    n_questions: int
    n_ballots: int
    n_valid: int
    n_invalid: int
    n_completed: int
    invalid_by_error: dict[str, int]
    by_stage: ByStage
    conditioned_cohort: CohortCount
    unconditioned_cohort: CohortCount
    agree_top: Count
    agree_family: Count


class InvalidBallot(JsonRecord):
    """An invalid ballot as recorded (the first 20), its raw reply cut to 300 characters."""

    # the ballot record's own fields, copied as the record gave them (free-form)
    question: Any
    cohort: str
    evaluator: Any
    persona: Any
    replicate: Any
    stage: int
    error: str | None
    raw: str


class Ranking(JsonRecord):
    """The source-blind ranking's ballots, analysed (appendix D)."""

    summary: RankingSummary
    questions: dict[str, RankingQuestion]
    invalid_examples: tuple[InvalidBallot, ...]


class SignFlip(JsonRecord):
    sum: int
    p: float


class ChoiceBlock(JsonRecord, kw_only=True):
    n_choices: int
    n_participants: int
    match_conditioned_top: int
    match_unconditioned_top: int
    sign_flip: SignFlip


class DisagreeBlock(ChoiceBlock, kw_only=True):
    questions: int  # questions where the cohorts' tops differ


class Agreement(JsonRecord):
    n_questions: int
    mean_modal_share: float
    pairwise_agreement: float
    uniform_baseline: float | None


class Calibration(ChoiceBlock, kw_only=True):
    """Participants' choices against the cohorts' top candidates (appendix D.1)."""

    cohort_tops_from: str  # records | ranking
    conditioned_source: int
    conditioned_expected: Annotated[float | None, OMIT_NONE] = None
    cohorts_disagree: DisagreeBlock
    agreement: Agreement | None
