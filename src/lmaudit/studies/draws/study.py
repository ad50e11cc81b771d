"""The draws study behind the pipeline (seed 004): do a model's sampled answers persist from
one draw to the next? The hooks come from the study's layout
(:class:`~lmaudit.studies.layout.LayoutStudy`): the plan in :mod:`.planning`, the typed results
(:mod:`.results`) in :mod:`.analysis`, the recorded views in :mod:`.views`, the page in
:mod:`.report`; its own are sampling (or reading sequences drawn elsewhere) in :mod:`.measure`,
a plan that may be frozen before its data exist, and an analysis that streams the rows."""

from __future__ import annotations

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.studies.base import Measured, Measurements, Plan, RunContext, StudyResult
from lmaudit.studies.draws import analysis, measure, planning, views
from lmaudit.studies.draws.config import DrawsStudyConfig
from lmaudit.studies.draws.results import DrawsResults
from lmaudit.studies.layout import LayoutStudy, ReportPage, StudyLayout
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
class DrawsStudy(LayoutStudy):
    """Do a model's sampled answers persist from one draw to the next (seed 004)?"""

    name = "draws"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_sequences", "n_rejected", "min_holm_p", "max_rho_upper")
    config = DrawsStudyConfig
    data_keys = planning.DATA_KEYS
    compare_columns = COMPARE_COLUMNS
    has_yaml = True
    result_type = DrawsResults

    layout = StudyLayout(planning=planning, analysis=analysis, views=views)

    def report_page(self) -> ReportPage:
        from lmaudit.studies.draws.report import page  # matplotlib: when a report is rendered

        return page

    def plan(self, ctx: RunContext) -> Plan:
        return planning.plan(ctx.cfg, freezing_open=ctx.freezing_open)

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        return measure.measure(ctx.cfg, plan, backend)

    def needs_backend(self, cfg: DictConfig) -> bool:
        """Imported draws need no model: the pipeline then loads none and records none."""
        return not planning.settings(cfg).import_path

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        """The rows are streamed, not kept (an analysis keeps less than the rows)."""
        return self.result(analysis.analyze_rows(cfg, measurements.iter_rows(), measurements.source))
