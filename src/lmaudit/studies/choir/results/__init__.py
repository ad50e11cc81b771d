"""The choir study's typed results: the body of ``results.json``, one class per section.

:class:`ChoirResults` is the top; its sections follow the analysis: per question
(:class:`QuestionResult`, :mod:`.question`: codebook, salience, agreement, signal-to-chance,
lift, echo, cells), across questions (:mod:`.across`: :class:`AcrossQuestions`, width bins,
recoverability, leakage, cue stripping, metric sensitivity, conditions, novelty against
width), the source-blind ranking and the participants' calibration (:mod:`.ranking`), the
design and an imported log's audit (:mod:`.design`). Every ``[lo, hi]`` pair is the shared
:class:`~lmaudit.results.Interval`. The headline is a method of :class:`ChoirResults`; the other
views the pipeline records (metrics, tags, summary, figure data) are in :mod:`..views`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any

from pydantic import Field

from lmaudit.interop.sections import LogAudit
from lmaudit.results import OMIT_NONE, JsonRecord
from lmaudit.studies.choir.results.across import (
    AcrossQuestions,
    BinMean,
    CodebookMetricSensitivity,
    ConditionSummary,
    ContrastSummary,
    CuePair,
    CueStripping,
    EchoCalibration,
    Leakage,
    NoveltyBin,
    NoveltyByWidth,
    Recovery,
    WidthBin,
)
from lmaudit.studies.choir.results.design import Design, LlmExtraction, RefusedLists, RuleExtraction
from lmaudit.studies.choir.results.question import Contrast, Echo, QuestionResult, SalienceTable
from lmaudit.studies.choir.results.ranking import (
    Calibration,
    Cohort,
    CohortCount,
    CohortDecided,
    Cohorts,
    Count,
    Ranking,
    RankingQuestion,
)
from lmaudit.studies.envelope import StudyResults

__all__ = [
    "AcrossQuestions",
    "BinMean",
    "Calibration",
    "ChoirResults",
    "CodebookMetricSensitivity",
    "Cohort",
    "CohortCount",
    "CohortDecided",
    "Cohorts",
    "ConditionSummary",
    "Contrast",
    "ContrastSummary",
    "Count",
    "CuePair",
    "CueStripping",
    "Design",
    "Echo",
    "EchoCalibration",
    "Leakage",
    "ListsSections",
    "LlmExtraction",
    "LogAudit",
    "NoveltyBin",
    "NoveltyByWidth",
    "QuestionResult",
    "Ranking",
    "RankingQuestion",
    "Recovery",
    "RefusedLists",
    "RuleExtraction",
    "SalienceTable",
    "WidthBin",
]


class ListsSections(JsonRecord, kw_only=True):
    """The sections the analysis of the free lists finds (``lists.analyze_lists``); the choir
    results hold them beside the design, the ranking and the calibration."""

    codebook_source: str  # clustered | coded
    across_questions: Annotated[AcrossQuestions, Field(alias="summary")]
    questions: dict[str, QuestionResult]  # the stripped prompts of cue pairs included
    width_bins: tuple[WidthBin, ...]
    recoverability: dict[str, Recovery]  # model, persona, persona_within_model_loqo, ...
    leakage: Leakage | None
    cue_stripping: CueStripping | None
    echo_calibration: EchoCalibration | None
    codebook_metric_sensitivity: CodebookMetricSensitivity | None
    conditions: ConditionSummary | None
    novelty_by_width: NoveltyByWidth | None

    def sections(self) -> dict[str, Any]:
        """Each lists section by its field name: the records themselves, not copies."""
        return {f.name: getattr(self, f.name) for f in fields(ListsSections)}


class ChoirResults(StudyResults, ListsSections, kw_only=True):
    """The choir study's results (seed 003): the lists sections (:class:`ListsSections`) and
    the rest."""

    study: str = "choir"
    design: Design
    # the embedder's backend identity, copied as the backend gave it (free-form); None when
    # the lists are hand-coded (nothing embedded)
    embedder: dict[str, Any] | None
    ranking: Ranking | None
    calibration: Calibration | None
    log_audit: Annotated[LogAudit | None, OMIT_NONE] = None

    def headline(self) -> float | None:
        """The share of questions with above-chance unconditioned agreement (signal-to-chance > 1),
        over every question analysed, as the seed counts (93/100) and ``summary.above_chance_share``
        does: a question without a signal-to-chance (fewer than two members with lists) counts
        against."""
        return self.across_questions.above_chance_of_all
