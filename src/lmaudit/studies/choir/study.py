"""The choir study behind the pipeline (seed 003): free-list elicitation across a model ensemble.

Each hook is one call: the plan in :mod:`.planning`, eliciting (or reading lists recorded
elsewhere), extracting, embedding and ranking in :mod:`.measure`, the typed results in
:mod:`.analysis` (:mod:`.results`), their recorded views in :mod:`.views`, the page in :mod:`.report`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.errors import InputError, NotCombinable
from lmaudit.studies.base import Measured, Measurements, Plan, RunContext, Study, StudyResult
from lmaudit.studies.choir import analysis, measure, planning, sweep, views
from lmaudit.studies.choir.config import GROUPS, ChoirStudyConfig
from lmaudit.studies.choir.results import ChoirResults
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
class ChoirStudy(Study):
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

    def default_run_name(self, cfg: DictConfig) -> str:
        return planning.default_run_name(cfg)

    def plan_config(self, cfg: DictConfig) -> dict[str, Any]:
        return planning.plan_config(cfg)

    def plan(self, ctx: RunContext) -> Plan:
        return planning.plan(ctx.cfg, freezing_open=ctx.freezing_open)

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        return measure.measure(ctx.cfg, ctx)

    def needs_backend(self, cfg: DictConfig) -> bool:
        return False  # every member (and the embedder) is opened through ctx.backends

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        return self.result(analysis.analyze_rows(cfg, measurements.rows, measurements.source))

    def report(self, result: StudyResult, ctx: RunContext) -> str:
        from lmaudit.reporting.page import read_rows
        from lmaudit.studies.choir.report.page import render_report  # matplotlib: when used

        audit = dict(ctx.audit)
        rows = read_rows(audit, ctx.run_dir)
        assert isinstance(result.results, ChoirResults)  # made by result_type
        return render_report(result.results, ctx.plan.doc if ctx.plan else None, audit, rows)

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        assert isinstance(result.results, ChoirResults)  # made by result_type
        return views.plot_data(result.results)

    def design_key(self, cfg: DictConfig) -> str | None:
        return sweep.design_key(cfg)

    def combine_sweep(self, cfgs: list[DictConfig], run_dirs: list[Path], out: Path) -> DictConfig:
        try:
            return sweep.combine_sweep(cfgs, run_dirs, out)
        except InputError as e:
            raise NotCombinable(str(e)) from None
