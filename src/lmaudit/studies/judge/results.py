"""The judge study's typed results: the body of ``results.json`` as frozen dataclasses, read
back checked field by field (:meth:`JudgeResults.from_json`) and written by one ``to_json``.

:class:`JudgeResults` holds the run's design and one record per section: those every run has
are in :mod:`.sections`, those imported pairwise verdicts add (``order_swap``, ``length``) in
:mod:`.import_sections`. Sections that need conditions in given roles (``patterns``,
``model_wins``) are either evaluated or :class:`~.sections.NotEvaluable` with the reason. The
headline is a method of :class:`JudgeResults`; the other views the pipeline records (metrics,
tags, summary, figure data) are in :mod:`.views`; the maths behind every number is in
:mod:`.analysis` and the modules it calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from lmaudit.results import OMIT_NONE, FileDigest, JsonRecord
from lmaudit.studies.envelope import StudyResults
from lmaudit.studies.judge.import_sections import LengthSection, OrderSwap
from lmaudit.studies.judge.sections import (
    Comparison,
    Endpoints,
    Validity,
)

if TYPE_CHECKING:
    from lmaudit.studies.base import StudyResult

__all__ = ["ConditionSpec", "Design", "Deviation", "JudgeIdentity", "JudgeResults"]

# --- the design ------------------------------------------------------------------------


class JudgeIdentity(JsonRecord):
    """The judge that answered a run lmaudit judged."""

    name: str
    identity_digest: str


class Deviation(JsonRecord):
    """A deviation from the protocol recorded for the run."""

    id: str
    description: str


class ConditionSpec(JsonRecord):
    """A condition as judged: which responses it wraps, whether A and B are exchanged."""

    id: str
    wrap: tuple[str, ...]
    swap: bool


class Design(JsonRecord, kw_only=True):
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
    plan_digest: Annotated[str | None, OMIT_NONE] = None
    readout: Annotated[str | None, OMIT_NONE] = None
    # an import: lmaudit's own folder, or another tool's file
    import_dir: Annotated[str | None, OMIT_NONE] = None
    import_path: Annotated[str | None, OMIT_NONE] = None
    format: Annotated[str | None, OMIT_NONE] = None
    files: Annotated[dict[str, FileDigest] | None, OMIT_NONE] = None
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


class CombinedDesign(Design, kw_only=True):
    """The design of a combined sweep: no single plan (``plan_digest`` is null), each job's
    plan digest listed."""

    plan_digest: None
    job_plan_digests: tuple[str, ...]

    @classmethod
    def of(cls, doc: dict[str, Any], source: str) -> Design:
        """A design record read as what it is: a combined sweep's when it lists its jobs' plans."""
        return (cls if "job_plan_digests" in doc else Design).from_json(doc, source)


class Params(JsonRecord):
    alpha: float
    reference: str


class MappingFile(JsonRecord):
    """The hidden model mapping read to unblind the verdicts."""

    path: str


# --- the results -------------------------------------------------------------------------


class JudgeResults(StudyResults, Endpoints, kw_only=True):
    """The judge study's results (seed 001): does a content-preserving change of presentation
    flip an LLM judge's pairwise verdicts? Beside the run's design, validity and the imported
    pairs' sections, every endpoint (:class:`~.sections.Endpoints`)."""

    study: Literal["judge"]
    mode: str  # judge | import
    design: Design | CombinedDesign
    deviations: tuple[Deviation, ...]
    params: Params
    mapping: MappingFile | None
    validity: Validity
    order_swap: Annotated[OrderSwap | None, OMIT_NONE] = None
    length: Annotated[LengthSection | None, OMIT_NONE] = None

    @classmethod
    def of(cls, result: StudyResult) -> JudgeResults:
        """The typed results of a result the pipeline hands back to the study."""
        r = result.results
        if not isinstance(r, cls):
            raise TypeError(f"not the judge study's results: {type(r).__name__}")
        return r

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

    def headline(self) -> float:
        return self.disagreement_rate()
