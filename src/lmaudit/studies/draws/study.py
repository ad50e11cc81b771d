"""The draws study behind the pipeline (seed 004): do a model's sampled answers persist from
one draw to the next? Each hook is one call: the plan in :mod:`.planning`, sampling (or
reading sequences drawn elsewhere) in :mod:`.measure`, the typed results (:mod:`.results`) in
:mod:`.analysis`, the recorded views in :mod:`.views` (methods of the results), the page in
:mod:`.report`."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.reporting.page import read_rows
from lmaudit.studies.base import Measured, Measurements, Plan, RunContext, Study, StudyResult
from lmaudit.studies.draws import analysis, measure, planning, views
from lmaudit.studies.draws.config import DrawsStudyConfig
from lmaudit.studies.draws.report.page import render_report
from lmaudit.studies.draws.results import DrawsResults
from lmaudit.studies.registry import register_study

__all__ = ["COMPARE_COLUMNS", "DrawsStudy"]

# the columns `lmaudit compare` shows for this study's runs
COMPARE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("families", "metric:n_families", "model families analysed"),
    ("sequences", "metric:n_sequences", "draw sequences analysed (after exclusions and de-duplication)"),
    ("rejected (Holm)", "metric:n_rejected", "families whose persistence test rejects (Holm-corrected)"),
    ("min Holm p", "metric:min_holm_p", "the smallest Holm-adjusted p of the run's families"),
    ("max rho_upper", "metric:max_rho_upper", "the largest upper bound on persistence rho of its families"),
    ("flagged sources", "tag:flagged_sources", "family:source pairs the grouped-sequence diagnostic flags"),
    (
        "max design effect",
        "metric:error_bars.max_design_effect",
        "imported logs: the largest (clustered / naive standard error)^2 of a model's scores on a task",
    ),
    (
        "max clustered/log SE",
        "metric:error_bars.max_clustered_over_log",
        "imported logs: the largest ratio of the sample-clustered standard error to the stderr the log reports",
    ),
)


@register_study
class DrawsStudy(Study):
    """Do a model's sampled answers persist from one draw to the next (seed 004)?"""

    name = "draws"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_sequences", "n_rejected", "min_holm_p", "max_rho_upper")
    config = DrawsStudyConfig
    data_keys = planning.DATA_KEYS
    compare_columns = COMPARE_COLUMNS
    has_yaml = True
    result_type = DrawsResults

    def default_run_name(self, cfg: DictConfig) -> str:
        return planning.default_run_name(cfg)

    def plan_config(self, cfg: DictConfig) -> dict[str, Any]:
        return planning.plan_config(cfg)

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        return measure.measure(ctx.cfg, plan, backend)

    def plan(self, ctx: RunContext) -> Plan:
        return planning.plan(ctx.cfg, freezing_open=ctx.freezing_open)

    def needs_backend(self, cfg: DictConfig) -> bool:
        """Imported draws need no model: the pipeline then loads none and records none."""
        return not planning.settings(cfg).import_path

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        return self.result(analysis.analyze_rows(cfg, measurements.iter_rows(), measurements.source))

    def report(self, result: StudyResult, ctx: RunContext) -> str:
        plan_doc = ctx.plan.doc if ctx.plan is not None else None
        audit = dict(ctx.audit)
        rows = read_rows(audit, ctx.run_dir)
        return render_report(results=self._typed(result), plan=plan_doc, audit=audit, rows=rows)

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        return views.plot_data(self._typed(result))

    def _typed(self, result: StudyResult) -> DrawsResults:
        """The result's typed results (a draws result always holds them: :attr:`result_type`)."""
        assert isinstance(result.results, DrawsResults), type(result.results)
        return result.results
