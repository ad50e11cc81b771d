"""The judge study behind the pipeline (seed 001): does a content-preserving change of
presentation flip an LLM judge's pairwise verdicts? The hooks come from the study's layout
(:class:`~lmaudit.studies.layout.LayoutStudy`): the plan in :mod:`.planning`, the results in
:mod:`.analysis` (typed: :class:`.results.JudgeResults`), the recorded views in :mod:`.views`,
sweeps in :mod:`.sweep`, the page in :mod:`.report`; its own are judging (or reading an import)
in :mod:`.measure`, the protocol files, the audit section and the results template."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.studies.base import Measured, Plan, RunContext, StudyResult
from lmaudit.studies.judge import analysis, measure, planning, sweep, views
from lmaudit.studies.judge.config import (
    JudgeConditionSetConfig,
    JudgeRubricConfig,
    JudgeStudyConfig,
    JudgeWrapperConfig,
)
from lmaudit.studies.judge.freeze import protocol_artifacts
from lmaudit.studies.judge.results import JudgeResults
from lmaudit.studies.layout import LayoutStudy, ReportPage, StudyLayout
from lmaudit.studies.registry import register_study

__all__ = ["COMPARE_COLUMNS", "JudgeStudy"]

# the columns `lmaudit compare` shows for this study's runs
COMPARE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("conditions", "tag:conditions", "the wrapper conditions judged"),
    ("isolation", "tag:isolation", "fresh: no judgment sees another; shared: one context (a deviation)"),
    ("prompts", "metric:n_prompts", "prompts judged per condition"),
    ("k", "metric:k", "judgments per prompt and condition (replicates)"),
    ("invalid", "metric:n_invalid", "judgments whose verdict could not be read"),
    ("PA vs P0", "metric:disagreement.PA.rate", "share of judgments that changed from P0 under PA"),
    ("PB vs P0", "metric:disagreement.PB.rate", "share of judgments that changed from P0 under PB"),
    ("PAB vs P0", "metric:disagreement.PAB.rate", "share of judgments that changed from P0 under PAB"),
    ("SWAP vs P0", "metric:disagreement.SWAP.rate", "share changed from P0 with A and B swapped"),
    (
        "position consistency",
        "metric:order_swap.position_consistency",
        "imported pairs judged in both orders: share with the same winner (or TIE) in both (Shi et al.)",
    ),
    (
        "preference fairness",
        "metric:order_swap.preference_fairness",
        "(recency- - primacy-preferred pairs) / pairs, in [-1, 1]: below 0 the first-shown answer is favoured",
    ),
    (
        "random order: first wins",
        "metric:order_swap.randomized.first_rate",
        "imported pairs judged once in a random order: share of decisive verdicts won by the first shown",
    ),
    (
        "random order: p",
        "metric:order_swap.randomized.p",
        "exact two-sided binomial test of that share against 1/2 (valid if the order was random)",
    ),
    ("deviations", "tag:deviations", "deviations from the protocol recorded for the run (none: none)"),
)


@register_study
class JudgeStudy(LayoutStudy):
    """Does a content-preserving change of presentation flip an LLM judge (seed 001)?"""

    name = "judge"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_prompts", "k", "n_invalid", "disagreement_rate")
    config = JudgeStudyConfig
    groups: ClassVar[Mapping[str, type]] = {
        "condition": JudgeConditionSetConfig,
        "rubric": JudgeRubricConfig,
        "wrapper": JudgeWrapperConfig,
    }
    compare_columns = COMPARE_COLUMNS
    has_yaml = True
    result_type = JudgeResults

    layout = StudyLayout(planning=planning, analysis=analysis, views=views, sweep=sweep)

    def report_page(self) -> ReportPage:
        from lmaudit.studies.judge.report import page  # matplotlib: when a report is rendered

        return page

    def needs_backend(self, cfg: DictConfig) -> bool:
        """Imported results need no judge: the pipeline then loads no model."""
        s = planning.settings(cfg)
        return not (s.import_dir or s.import_path)

    def artifacts(self, plan: Plan) -> dict[str, bytes]:
        return protocol_artifacts(plan.doc) if plan.get("mode") == "judge" else {}

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        return measure.measure(ctx.cfg, plan, backend, ctx.measured_model)

    def audit_section(self, result: StudyResult) -> dict[str, Any] | None:
        return analysis.audit_section(JudgeResults.of(result))

    def results_template(self, cfg: DictConfig) -> Mapping[str, Any] | None:
        return analysis.results_template(cfg)
