"""The QQ study behind the pipeline (seed 000): do a model's sequential yes/no judgments
satisfy the QQ equality? Each hook is one call: the plan in :mod:`.planning`, the backend
requests in :mod:`.measure`, the results in :mod:`.analysis`, the recorded views in
:mod:`.views`, the page in :mod:`.report`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.reporting.page import read_rows
from lmaudit.studies.base import Measured, Measurements, Plan, RunContext, Study, StudyResult
from lmaudit.studies.qq import analysis, measure, planning, views
from lmaudit.studies.qq.analysis_bank import bank_digest
from lmaudit.studies.qq.config import GROUPS, QQStudyConfig
from lmaudit.studies.qq.report.page import render_report
from lmaudit.studies.qq.results import QQResults
from lmaudit.studies.registry import register_study

__all__ = ["COMPARE_COLUMNS", "QQStudy"]

# the columns `lmaudit compare` shows for this study's runs
COMPARE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("framing", "param:framing.name", "how the question pair is put to the model (framing group)"),
    ("mapping", "param:mapping.name", "which answer labels stand for yes and no (mapping group)"),
    ("estimand", "param:estimand.kind", "what is estimated from the answers (estimand group)"),
    ("items", "metric:n_items", "question pairs analysed"),
    ("SAT", "metric:n_satisfied", "items whose QQ equality holds (within epsilon)"),
    ("VIOL", "metric:n_violated", "items that violate the QQ equality"),
    ("IND", "metric:n_indeterminate", "items whose QQ verdict is indeterminate"),
    ("NC", "metric:n_gamma_noncontextual", "items whose Gamma class is noncontextual"),
    ("CTX", "metric:n_gamma_contextual", "items whose Gamma class is contextual"),
    ("saturated", "metric:n_saturated", "items with saturated answer probabilities"),
    ("G1", "tag:gate.G1", "gate G1 (every answer label is one token): PASS or FAIL"),
    ("G2", "tag:gate.G2", "gate G2 (mass off the labels < 0.01 at every position): PASS or FAIL"),
    ("G3", "tag:gate.G3", "gate G3 (spot check of sampled trajectories): PASS or FAIL"),
)


@register_study
class QQStudy(Study):
    """Question-order effects and the QQ equality (seed 000)."""

    name = "qq"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_items", "n_violated", "n_gamma_contextual", "max_other_mass")
    config = QQStudyConfig
    groups: ClassVar[Mapping[str, type]] = GROUPS
    compare_columns = COMPARE_COLUMNS
    has_yaml = True
    result_type = QQResults

    def plan_config(self, cfg: DictConfig) -> dict[str, Any]:
        return planning.plan_config(cfg)

    def tracked_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return planning.tracked_params(config)

    def default_run_name(self, cfg: DictConfig) -> str:
        return planning.default_run_name(cfg)

    def plan(self, ctx: RunContext) -> Plan:
        return planning.plan(ctx.cfg)

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        return measure.measure(ctx.cfg, backend)

    def analysis_inputs(self, cfg: DictConfig) -> dict[str, Any]:
        return {"items": bank_digest(cfg.study["items"].path)}

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        return self.result(analysis.analyze_rows(cfg, measurements.rows, measurements.source))

    def report(self, result: StudyResult, ctx: RunContext) -> str:
        plan_doc = ctx.plan.doc if ctx.plan is not None else None
        audit = dict(ctx.audit)
        rows = read_rows(audit, ctx.run_dir)
        return render_report(results=self.typed(result), plan=plan_doc, audit=audit, rows=rows)

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        return views.plot_data(self.typed(result))

    def results_template(self, cfg: DictConfig) -> Mapping[str, Any] | None:
        return analysis.results_template(cfg).to_json()

    @staticmethod
    def typed(result: StudyResult) -> QQResults:
        """A result's typed results (the study's own: :attr:`result_type`)."""
        assert isinstance(result.results, QQResults)
        return result.results
