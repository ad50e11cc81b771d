"""LayoutStudy: the hooks of a study laid out as the built-in ones call the modules it declares
once (planning, analysis, views, sweep) and its report page, with the same arguments for every
study; a hook a study overrides stays its own."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from lmaudit.errors import InputError, NotCombinable
from lmaudit.studies.base import Measurements, Plan, RunContext, Study
from lmaudit.studies.envelope import StudyResults
from lmaudit.studies.layout import LayoutStudy, ReportInputs, StudyLayout
from lmaudit.studies.registry import get_study


class _Counts(StudyResults, kw_only=True):
    study: str
    n: int

    def headline(self) -> float:
        return self.n / 10


def _analyze_rows(cfg: DictConfig, rows: list[dict[str, Any]], source: str) -> _Counts:
    return _Counts(study="counts", n=len(rows))


def _combine(cfgs: list[DictConfig], run_dirs: list[Path], out: Path) -> DictConfig:
    raise InputError(f"{run_dirs[0]}: the jobs disagree on field 'n'")


PLANNING = SimpleNamespace(
    default_run_name=lambda cfg: f"counts-{cfg.model.name}",
    plan_config=lambda cfg: {"model": cfg.model.name},
    plan=lambda cfg: Plan.make({"study": "counts", "config": {}}, 3),
)
VIEWS = SimpleNamespace(
    metrics=lambda r: {"n": float(r.n)},
    tags=lambda r: {"size": "small" if r.n < 5 else "large"},
    summary=lambda r: f"counts: {r.n} rows",
    plot_data=lambda r: {"rows": [{"i": i} for i in range(r.n)]},
)
SWEEP = SimpleNamespace(design_key=lambda cfg: "one design", combine_sweep=_combine)


class _Page:
    """A report page that records what it was called with."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def render_report(self, inputs: ReportInputs[Any]) -> str:
        self.calls.append(
            {"results": inputs.results, "plan": inputs.plan, "audit": inputs.audit, "rows": list(inputs.rows)}
        )
        return "<html></html>"


class _CountsStudy(LayoutStudy):
    name = "counts"
    config = dict
    result_type = _Counts
    layout = StudyLayout(planning=PLANNING, analysis=SimpleNamespace(analyze_rows=_analyze_rows), views=VIEWS)  # type: ignore[arg-type]
    page = _Page()

    def report_page(self) -> Any:
        return self.page

    def measure(self, plan: Plan, backend: Any, ctx: RunContext) -> Any:
        raise AssertionError("not measured here")


class _SweptStudy(_CountsStudy):
    layout = StudyLayout(  # type: ignore[arg-type]
        planning=PLANNING, analysis=SimpleNamespace(analyze_rows=_analyze_rows), views=VIEWS, sweep=SWEEP
    )


CFG = OmegaConf.create({"model": {"name": "m1"}})


def test_planning_and_analysis_hooks_call_the_declared_modules() -> None:
    study = _CountsStudy()
    assert study.default_run_name(CFG) == "counts-m1"
    assert study.plan_config(CFG) == {"model": "m1"}
    assert study.plan(RunContext(cfg=CFG, stage="plan", run_dir=Path("."))).n_requests == 3
    result = study.analyze(CFG, Measurements([{"a": 1}, {"a": 2}, {"a": 3}], "m.jsonl"))
    assert result.results == _Counts(study="counts", n=3)
    assert result.headline == pytest.approx(0.3, abs=1e-12)
    assert (result.metrics, result.tags, result.summary) == ({"n": 3.0}, {"size": "small"}, "counts: 3 rows")
    assert study.plot_data(result) == {"rows": [{"i": 0}, {"i": 1}, {"i": 2}]}


def test_a_stored_results_body_is_read_back_and_another_studys_results_refused() -> None:
    study = _CountsStudy()
    assert study.result({"study": "counts", "n": 7}).tags == {"size": "large"}
    with pytest.raises(InputError, match=r"^runs/x/results\.json: not a _Counts: field 'n'"):
        study.result({"study": "counts", "n": "7"}, "runs/x/results.json")

    class Other(StudyResults, kw_only=True):
        n: int

    with pytest.raises(TypeError, match="not the counts study's results: Other"):
        study.result(Other(n=1))


def test_the_report_gets_typed_results_plan_audit_and_the_rows_analysed(tmp_path: Path) -> None:
    rows = [{"i": 1}, {"i": 2}]
    measured = tmp_path / "elsewhere.jsonl"
    measured.write_text("".join(json.dumps(r) + "\n" for r in rows))
    study = _CountsStudy()
    study.page = _Page()
    result = study.result(_Counts(study="counts", n=2))
    plan = Plan.make({"study": "counts"}, 0)
    audit = {"analyze": {"measurements": str(measured)}}
    ctx = RunContext(cfg=CFG, stage="report", run_dir=tmp_path, plan=plan, audit=audit)
    assert study.report(result, ctx) == "<html></html>"
    (call,) = study.page.calls
    assert call == {"results": result.results, "plan": plan.doc, "audit": audit, "rows": rows}
    # no plan at hand, no measurements: None and no rows
    study.report(result, RunContext(cfg=CFG, stage="report", run_dir=tmp_path / "none"))
    assert study.page.calls[1] | {"results": None} == {"results": None, "plan": None, "audit": {}, "rows": []}


def test_sweeps_combine_through_the_sweep_module_and_refusals_become_not_combinable() -> None:
    assert _CountsStudy().design_key(CFG) is None
    with pytest.raises(NotCombinable, match="does not combine"):
        _CountsStudy().combine_sweep([CFG], [Path("a")], Path("out"))
    assert _SweptStudy().design_key(CFG) == "one design"
    with pytest.raises(NotCombinable, match=r"^a: the jobs disagree on field 'n'$"):
        _SweptStudy().combine_sweep([CFG], [Path("a")], Path("out"))


def test_a_layout_study_without_its_page_or_measure_cannot_be_made() -> None:
    class NoPage(LayoutStudy):
        name = "nopage"
        layout = _CountsStudy.layout

        def measure(self, plan: Plan, backend: Any, ctx: RunContext) -> Any:
            return None

    with pytest.raises(TypeError, match="report_page"):
        NoPage()  # type: ignore[abstract]


@pytest.mark.parametrize("name", ["qq", "judge", "choir", "draws"])
def test_every_built_in_study_is_a_layout_study_whose_page_takes_its_report_inputs(name: str) -> None:
    study = get_study(name)
    assert isinstance(study, LayoutStudy) and isinstance(study, Study)
    params = list(inspect.signature(study.report_page().render_report).parameters.values())
    assert [(p.name, p.kind) for p in params] == [("inputs", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    assert params[0].annotation == f"ReportInputs[{study.result_type.__name__}]"


def test_report_inputs_default_to_no_plan_an_empty_audit_and_no_rows() -> None:
    inputs = ReportInputs(_Counts(study="counts", n=0))
    assert (inputs.plan, inputs.audit, tuple(inputs.rows)) == (None, {}, ())
