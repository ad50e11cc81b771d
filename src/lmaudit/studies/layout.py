"""A study laid out as the built-in ones (the table in docs/architecture.md): its hooks call its
``planning``, ``analysis``, ``views`` and ``sweep`` modules, declared once on the class
(:class:`StudyLayout`), and its ``report/page.py`` (:meth:`LayoutStudy.report_page`). Each
module is typed by what it must provide (a Protocol that a module satisfies), so mypy checks a
study's modules against the hooks that call them. A study from another package may derive
from :class:`~lmaudit.studies.base.Study` directly and implement the hooks itself.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from omegaconf import DictConfig

from lmaudit.errors import InputError, NotCombinable
from lmaudit.reporting.page import read_rows
from lmaudit.studies.base import Measurements, Plan, RunContext, Study, StudyResult
from lmaudit.studies.envelope import StudyResults

__all__ = [
    "LayoutStudy",
    "ReportInputs",
    "ReportPage",
    "StudyAnalysis",
    "StudyLayout",
    "StudyPlanning",
    "StudySweep",
    "StudyViews",
]


class StudyPlanning(Protocol):
    """What a study's ``planning`` module provides (:class:`LayoutStudy`)."""

    def default_run_name(self, cfg: DictConfig, /) -> str: ...

    def plan_config(self, cfg: DictConfig, /) -> dict[str, Any]: ...

    def plan(self, cfg: DictConfig, /) -> Plan: ...


class StudyAnalysis(Protocol):
    """What a study's ``analysis`` module provides: its typed results from the measurement rows
    (``source`` names them in errors)."""

    def analyze_rows(self, cfg: DictConfig, rows: list[dict[str, Any]], source: str, /) -> StudyResults: ...


class StudyViews(Protocol):
    """What a study's ``views`` module provides: the views the pipeline records of its typed
    results (each a function of the study's own result class; the headline is the results'
    own method, :meth:`~lmaudit.studies.envelope.StudyResults.headline`)."""

    def metrics(self, results: Any, /) -> dict[str, float]: ...

    def tags(self, results: Any, /) -> dict[str, str]: ...

    def summary(self, results: Any, /) -> str: ...

    def plot_data(self, results: Any, /) -> dict[str, list[dict[str, Any]]]: ...


class StudySweep(Protocol):
    """What a study's ``sweep`` module provides, for a study whose sweep jobs may split one
    design (:meth:`Study.design_key`, :meth:`Study.combine_sweep`; refusals as InputError)."""

    def design_key(self, cfg: DictConfig, /) -> str | None: ...

    def combine_sweep(self, cfgs: list[DictConfig], run_dirs: list[Path], out: Path, /) -> DictConfig: ...


R = TypeVar("R", bound=StudyResults)


@dataclass(frozen=True)
class ReportInputs(Generic[R]):
    """What a study's report page is rendered from: its typed results, the plan's document
    (None: a measurement file re-analysed without one), the audit record so far, and the
    measurement rows the results were computed from (for the samples shown; read once)."""

    results: R
    plan: Mapping[str, Any] | None = None
    audit: Mapping[str, Any] = field(default_factory=dict)
    rows: Iterable[Mapping[str, Any]] = ()


class ReportPage(Protocol):
    """What a study's ``report/page.py`` provides: the HTML page of its :class:`ReportInputs`
    (of the study's own result class)."""

    def render_report(self, inputs: ReportInputs[Any], /) -> str: ...


@dataclass(frozen=True)
class StudyLayout:
    """The modules a :class:`LayoutStudy` hands its hooks to; ``sweep`` None: its sweep jobs
    are never combined."""

    planning: StudyPlanning
    analysis: StudyAnalysis
    views: StudyViews
    sweep: StudySweep | None = None


class LayoutStudy(Study):
    """A study laid out as the built-in ones: its hooks call the modules it declares once in
    :attr:`layout`, and the page of :meth:`report_page`. Each hook may still be overridden.

    - ``default_run_name``, ``plan_config``, ``plan``: the planning module's (``plan`` of
      ``ctx.cfg`` alone: a study whose plan reads more of the context overrides it);
    - ``analyze``: the analysis module's ``analyze_rows`` of the measurement rows;
    - ``result``: the typed results with their views: the results' ``headline()`` and the views
      module's ``metrics``, ``tags``, ``summary``; ``plot_data``: the views module's;
    - ``report``: the page's ``render_report`` of its :class:`ReportInputs` (the typed results,
      the plan, the audit record and the rows the results were computed from);
    - ``design_key``, ``combine_sweep``: the sweep module's, when the layout has one (its
      refusals, InputError, become :class:`~lmaudit.errors.NotCombinable`).

    ``measure`` is the study's own."""

    layout: ClassVar[StudyLayout]

    @abstractmethod
    def report_page(self) -> ReportPage:
        """The study's ``report/page.py``, imported when a report is rendered (its figures may
        import matplotlib, which registering a study must not)."""

    def default_run_name(self, cfg: DictConfig) -> str:
        return self.layout.planning.default_run_name(cfg)

    def plan_config(self, cfg: DictConfig) -> dict[str, Any]:
        return self.layout.planning.plan_config(cfg)

    def plan(self, ctx: RunContext) -> Plan:
        return self.layout.planning.plan(ctx.cfg)

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        return self.result(self.layout.analysis.analyze_rows(cfg, measurements.rows, measurements.source))

    def result(self, results: StudyResults | Mapping[str, Any], source: str = "<results>") -> StudyResult:
        typed = self.typed_results(results, source)
        views = self.layout.views
        return StudyResult(
            typed, typed.headline(), views.metrics(typed), views.tags(typed), views.summary(typed)
        )

    def report(self, result: StudyResult, ctx: RunContext) -> str:
        audit = dict(ctx.audit)
        inputs = ReportInputs(
            self.typed_results(result.results),
            ctx.plan.doc if ctx.plan is not None else None,
            audit,
            read_rows(audit, ctx.run_dir),
        )
        return self.report_page().render_report(inputs)

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        return self.layout.views.plot_data(self.typed_results(result.results))

    def design_key(self, cfg: DictConfig) -> str | None:
        return None if self.layout.sweep is None else self.layout.sweep.design_key(cfg)

    def combine_sweep(self, cfgs: list[DictConfig], run_dirs: list[Path], out: Path) -> DictConfig:
        if self.layout.sweep is None:
            return super().combine_sweep(cfgs, run_dirs, out)
        try:
            return self.layout.sweep.combine_sweep(cfgs, run_dirs, out)
        except InputError as e:
            raise NotCombinable(str(e)) from None
