"""The QQ study behind the pipeline (seed 000): do a model's sequential yes/no judgments
satisfy the QQ equality? The hooks come from the study's layout
(:class:`~lmaudit.studies.layout.LayoutStudy`): the plan in :mod:`.planning`, the results in
:mod:`.analysis`, the recorded views in :mod:`.views`, the page in :mod:`.report`; its own are
the backend requests in :mod:`.measure`, the tracked params, the item bank's digest and the
results template."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.studies.base import Measured, Plan, RunContext
from lmaudit.studies.layout import LayoutStudy, ReportPage, StudyLayout
from lmaudit.studies.qq import analysis, measure, planning, views
from lmaudit.studies.qq.analysis_bank import bank_digest
from lmaudit.studies.qq.config import GROUPS, QQStudyConfig
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
class QQStudy(LayoutStudy):
    """Question-order effects and the QQ equality (seed 000)."""

    name = "qq"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_items", "n_violated", "n_gamma_contextual", "max_other_mass")
    config = QQStudyConfig
    groups: ClassVar[Mapping[str, type]] = GROUPS
    compare_columns = COMPARE_COLUMNS
    has_yaml = True
    result_type = QQResults

    layout = StudyLayout(planning=planning, analysis=analysis, views=views)

    def report_page(self) -> ReportPage:
        from lmaudit.studies.qq.report import page  # matplotlib: when a report is rendered

        return page

    def tracked_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return planning.tracked_params(config)

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        return measure.measure(ctx.cfg, backend)

    def analysis_inputs(self, cfg: DictConfig) -> dict[str, Any]:
        return {"items": bank_digest(cfg.study["items"].path)}

    def results_template(self, cfg: DictConfig) -> Mapping[str, Any] | None:
        return analysis.results_template(cfg).to_json()
