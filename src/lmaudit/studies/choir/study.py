"""The choir study behind the pipeline (seed 003): free-list elicitation across a model ensemble.

The hooks come from the study's layout (:class:`~lmaudit.studies.layout.LayoutStudy`): the plan
in :mod:`.planning`, the typed results (:mod:`.results`) in :mod:`.analysis`, their recorded
views in :mod:`.views`, sweeps in :mod:`.sweep`, the page in :mod:`.report`; its own are
eliciting (or reading lists recorded elsewhere), extracting, embedding and ranking in
:mod:`.measure`, and a plan that may be frozen before its data exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.studies.base import Measured, Plan, RunContext
from lmaudit.studies.choir import analysis, measure, planning, sweep, views
from lmaudit.studies.choir.config import GROUPS, ChoirStudyConfig
from lmaudit.studies.choir.results import ChoirResults
from lmaudit.studies.layout import LayoutStudy, ReportPage, StudyLayout
from lmaudit.studies.registry import register_study

__all__ = ["COMPARE_COLUMNS", "ChoirStudy"]

COMPARE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("questions", "metric:n_questions", "questions analysed"),
    ("members", "metric:n_models", "ensemble members whose free lists are compared"),
    ("above chance", "metric:above_chance", "questions whose agreement beats chance (signal-to-chance > 1)"),
    ("lift up", "metric:lift_up", "questions whose persona lift exceeds 1"),
    ("model acc", "metric:recover.model.accuracy", "accuracy recovering the member from its lists"),
    ("persona acc", "metric:recover.persona.accuracy", "accuracy recovering the persona from the lists"),
)


@register_study
class ChoirStudy(LayoutStudy):
    """Free-list elicitation across model ensembles (seed 003)."""

    name = "choir"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_questions", "n_models", "above_chance", "above_chance_significant", "lift_up")
    config = ChoirStudyConfig
    groups: ClassVar[Mapping[str, type]] = GROUPS
    measured_groups = ("ensemble",)  # its members are the models measured
    compare_columns: ClassVar[tuple[tuple[str, ...], ...]] = COMPARE_COLUMNS
    data_keys = (
        "config.study.import_path",
        "inputs.import",
        "config.study.ranking.import_path",
        "inputs.ballots",
        "config.study.calibration_path",
        "inputs.calibration",
        "config.study.profiles_path",
        "inputs.profiles",
        "config.study.codebook_path",
        "inputs.codebook",
    )
    has_yaml = True
    result_type = ChoirResults

    layout = StudyLayout(planning=planning, analysis=analysis, views=views, sweep=sweep)

    def report_page(self) -> ReportPage:
        from lmaudit.studies.choir.report import page  # matplotlib: when a report is rendered

        return page

    def plan(self, ctx: RunContext) -> Plan:
        return planning.plan(ctx.cfg, freezing_open=ctx.freezing_open)

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        return measure.measure(ctx.cfg, ctx)

    def needs_backend(self, cfg: DictConfig) -> bool:
        return False  # every member (and the embedder) is opened through ctx.backends
