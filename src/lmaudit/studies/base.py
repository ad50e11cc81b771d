"""The study contract: what a study is to the pipeline, declared in one place.

A study subclasses :class:`Study`, sets its class attributes and implements the abstract
hooks; every optional hook has a declared default here, so the pipeline, pre-registration,
tracking and sweeps never look a hook up by name. Results travel as a typed
:class:`StudyResult`; plans as :class:`Plan`; measurements as :class:`Measured` (what a
``measure`` produced) and :class:`Measurements` (what ``analyze`` reads back).

Studies never write run files: the pipeline writes the plan, the measurements, the results,
the report and whatever a study returns as artifacts, and assembles the audit record.
Register a study with :func:`lmaudit.studies.registry.register_study` (built-in studies) or
the ``lmaudit.studies`` entry-point group (studies in other installed packages).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from omegaconf import DictConfig, OmegaConf

from lmaudit.config.execution import without_execution
from lmaudit.errors import NotCombinable
from lmaudit.provenance.digest import json_digest
from lmaudit.provenance.io import iter_jsonl
from lmaudit.provenance.measured_model import MeasuredModel
from lmaudit.provenance.redact import redact_config
from lmaudit.studies.envelope import ScoredPrediction, StudyResults

if TYPE_CHECKING:
    from lmaudit.backends.cached import CachedBackend
    from lmaudit.backends.embed.cached import CachedEmbedder


@dataclass(frozen=True)
class Plan:
    """A resolved plan: the document written to ``plan.json``.

    ``doc`` holds the study's plan body (``study``, ``config``, ``inputs``, and whatever the
    study renders: prompts, packets, requests) plus ``n_requests`` and ``plan_digest``, the
    digest of the body. Make one with :meth:`make`; read one back with :meth:`from_json`."""

    doc: dict[str, Any]

    @classmethod
    def make(cls, body: Mapping[str, Any], n_requests: int) -> Plan:
        """The plan of ``body``; credentials in its config's URLs are redacted before the
        digest, so the same server behind another password makes the same plan."""
        body = dict(body)
        if "config" in body:
            body["config"] = redact_config(body["config"])
        return cls({**body, "n_requests": int(n_requests), "plan_digest": json_digest(body)})

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Plan:
        return cls(dict(doc))

    @property
    def digest(self) -> str:
        return str(self.doc["plan_digest"])

    @property
    def n_requests(self) -> int:
        return int(self.doc.get("n_requests", 0))

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.doc.get("config", {}))

    @property
    def inputs(self) -> dict[str, Any]:
        return dict(self.doc.get("inputs", {}))

    def __getitem__(self, key: str) -> Any:
        return self.doc[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.doc.get(key, default)


class Rows(Protocol):
    """Measurement rows: a list, or any sized iterable (rows read again on each pass)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[dict[str, Any]]: ...


@dataclass
class Measured:
    """What ``measure`` returns: the measurement rows (written to ``measurements.jsonl`` as
    they are iterated), files that derive from them (``artifacts``: path relative to the run's
    ``artifacts/`` folder -> exact bytes), and facts for the audit record's measure section."""

    rows: Rows
    artifacts: dict[str, bytes] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=dict)


class Measurements:
    """What ``analyze`` reads: measurement rows and where they came from (for messages).

    Given a ``path`` (and no rows), ``rows`` reads the file whole on first use, and
    :meth:`iter_rows` yields its rows one at a time without keeping them (for an analysis
    that keeps less than the rows)."""

    def __init__(
        self,
        rows: list[dict[str, Any]] | None = None,
        source: str = "<measurements>",
        *,
        path: str | Path | None = None,
    ) -> None:
        if rows is None and path is None:
            raise ValueError("Measurements need rows or a path")
        self._rows = rows
        self.source = source
        self.path = None if path is None else Path(path)

    @property
    def rows(self) -> list[dict[str, Any]]:
        if self._rows is None:
            assert self.path is not None
            self._rows = [obj for _, obj in iter_jsonl(self.path)]
        return self._rows

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        if self._rows is not None or self.path is None:
            yield from self.rows
            return
        for _, obj in iter_jsonl(self.path):
            yield obj


@dataclass(frozen=True)
class StudyResult:
    """A study's analysed result and the views the pipeline records.

    ``results`` is the study's typed results (a :class:`StudyResults`; the body of
    ``results.json`` is its :attr:`doc`); ``headline`` the one number a Hydra sweeper optimises
    (or None); ``metrics`` the numbers MLflow gets (a few of them for ``metrics.json``:
    ``Study.dvc_metrics``); ``tags`` gate outcomes and verdicts (MLflow tags); ``summary`` one
    line for the console."""

    results: StudyResults
    headline: float | None
    metrics: dict[str, float]
    tags: dict[str, str]
    summary: str

    @property
    def doc(self) -> dict[str, Any]:
        """The JSON body of ``results.json``."""
        return self.results.to_json()

    @property
    def scoreable(self) -> Mapping[str, Any]:
        """The view registered predictions are scored against (dotted paths into it)."""
        return self.doc

    @property
    def predictions(self) -> tuple[ScoredPrediction, ...]:
        """The scored predictions of a registered run (empty: none)."""
        return self.results.predictions or ()


class BackendProvider(Protocol):
    """Backends beyond the run's own, opened by the pipeline through the same response cache
    (a study that asks an ensemble of models, or embeds texts)."""

    def sampler(self, model: Mapping[str, Any]) -> CachedBackend:
        """A model config (as ``conf/model/*.yaml``) seen through the cache."""
        ...

    def embedder(self, embedder: Mapping[str, Any]) -> CachedEmbedder:
        """An embedding backend config (``kind``: minilm | openai | sim) seen through the cache."""
        ...


@dataclass(frozen=True)
class RunContext:
    """What a study sees of the run: the composed config, the run directory, the stage,
    the plan (built once by the pipeline, or read back from ``plan.json``) and, for reports,
    the audit record so far."""

    cfg: DictConfig
    stage: str
    run_dir: Path
    plan: Plan | None = None
    audit: Mapping[str, Any] = field(default_factory=dict)
    # freezing a registration made before its data exist (prereg data: open): the study's data
    # inputs may be missing, and the plan binds them by path only
    freezing_open: bool = False
    backends: BackendProvider | None = None  # set by the pipeline for measure
    # the model answering this run (name, backend, resolved identity and its digest): set by the
    # pipeline for measure, None when no run model answers (imported measurements)
    measured_model: MeasuredModel | None = None

    @property
    def progress(self) -> bool:
        return bool(self.cfg.get("progress", True))

    def with_plan(self, plan: Plan | None) -> RunContext:
        return dataclasses.replace(self, plan=plan)

    def with_audit(self, audit: Mapping[str, Any]) -> RunContext:
        return dataclasses.replace(self, audit=audit)

    def with_backends(self, backends: BackendProvider) -> RunContext:
        return dataclasses.replace(self, backends=backends)

    def with_measured_model(self, model: MeasuredModel) -> RunContext:
        return dataclasses.replace(self, measured_model=model)


def typed(node: Any, cls: type) -> Any:
    """A config node as an instance of its schema dataclass (defaults filled in, types checked);
    interpolations are resolved against the node's own root first."""
    if OmegaConf.is_config(node):
        node = OmegaConf.to_container(node, resolve=True)
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), node))


def grouped_config(cfg: DictConfig, groups: Iterable[str]) -> dict[str, Any]:
    """A run's config as a plan records it: ``cfg.study`` without its ``groups``, the model
    (without how it runs), and each group under its own key; credentials redacted."""
    study = OmegaConf.to_container(cfg.study, resolve=True)
    assert isinstance(study, dict)
    names = list(groups)
    out: dict[str, Any] = {"study": {k: v for k, v in study.items() if k not in names}}
    # how the model runs (runner, devices ...) is not part of the design
    out["model"] = without_execution(OmegaConf.to_container(cfg.model, resolve=True))
    for g in names:
        out[g] = study.get(g)
    return dict(redact_config(out))


class Study(ABC):
    """The contract between a study and the pipeline.

    Class attributes:

    - ``name``: the study's name (``study=<name>``, ``results/<name>/``, ``lmaudit-<name>``).
    - ``config``: the dataclass schema of ``cfg.study`` (``studies/<name>/config.py``).
    - ``groups``: the study's own config groups, ``conf/study/<name>/<group>/``, each with its
      schema; selected with ``<group>=<option>`` (or ``<name>/<group>=<option>``) and found at
      ``cfg.study.<group>``.
    - ``data_keys``: dotted paths into the plan that name imported data; an open registration
      (``prereg data: open``) binds the plan without them.
    - ``compare_columns``: ``(header, source, meaning)`` columns of ``lmaudit compare`` for
      its runs (source: ``param:``, ``metric:``, ``tag:`` or ``info:`` followed by the key;
      meaning: the legend's line for the column, optional).
    - ``has_yaml``: whether ``conf/study/<name>.yaml`` exists; a study from another package
      without one is selectable through its schema alone.
    - ``measured_groups``: those of ``groups`` that say which models answer (choir: its
      ensemble); a re-analysis takes them, like the model, from the plan beside the
      measurements.
    - ``dvc_metrics``: the few of :meth:`metrics` (by name) that a run's ``metrics.json``
      holds, so that ``dvc metrics show`` prints a row a terminal can show (empty: all of them);
      MLflow gets every metric.
    - ``result_type``: the study's typed results (a :class:`StudyResults`), whose methods give
      the views the pipeline records (headline, metrics, tags, summary).
    """

    name: ClassVar[str]
    config: ClassVar[type]
    groups: ClassVar[Mapping[str, type]] = {}
    data_keys: ClassVar[tuple[str, ...]] = ()
    compare_columns: ClassVar[tuple[tuple[str, ...], ...]] = ()
    has_yaml: ClassVar[bool] = False
    measured_groups: ClassVar[tuple[str, ...]] = ()
    dvc_metrics: ClassVar[tuple[str, ...]] = ()
    result_type: ClassVar[type[StudyResults]]

    # --- configuration -------------------------------------------------------------------

    def settings(self, cfg: DictConfig) -> Any:
        """``cfg.study`` as an instance of :attr:`config`."""
        return typed(cfg.study, self.config)

    def plan_config(self, cfg: DictConfig) -> dict[str, Any]:
        """The resolved config the plan records and digests (also the MLflow params): the
        study's settings, the model, and each of the study's groups under its own key
        (:func:`grouped_config`)."""
        return grouped_config(cfg, self.groups)

    def tracked_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The MLflow params of a run whose plan records ``config`` (:meth:`plan_config`): the
        fields that apply to its design (default: all). The plan keeps every field."""
        return dict(config)

    @abstractmethod
    def default_run_name(self, cfg: DictConfig) -> str:
        """The run's name when neither ``run_name=`` nor ``prereg=`` names it: what varies
        between runs of the study (its groups' choices) first, the model last, so that names
        cut short in a list still tell runs apart."""

    # --- plan / measure --------------------------------------------------------------------

    @abstractmethod
    def plan(self, ctx: RunContext) -> Plan:
        """Validate every input and render everything that will be asked. No model calls."""

    def needs_backend(self, cfg: DictConfig) -> bool:
        """False when the study imports measurements made elsewhere: no model is loaded."""
        return True

    def artifacts(self, plan: Plan) -> dict[str, bytes]:
        """Protocol files frozen before the first model call (path relative to the run's
        ``artifacts/`` folder -> exact bytes); a pure function of the plan."""
        return {}

    @abstractmethod
    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        """Ask the backend (through the cache) everything the plan holds, or read imported
        records; ``backend`` is None when :meth:`needs_backend` is False."""

    # --- analyze / report ---------------------------------------------------------------

    @abstractmethod
    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        """Pure: measurements and config in, result out (no model, no clock)."""

    def result(self, results: StudyResults | Mapping[str, Any], source: str = "<results>") -> StudyResult:
        """A result and its views: from the study's typed results, or from a stored
        ``results.json`` body (read back by :attr:`result_type`; ``source`` names it in errors).
        The views are the results' methods (:class:`StudyResults`)."""
        typed = self.typed_results(results, source)
        return StudyResult(typed, typed.headline(), typed.metrics(), typed.tags(), typed.summary())

    def typed_results(
        self, results: StudyResults | Mapping[str, Any], source: str = "<results>"
    ) -> StudyResults:
        """The study's own typed results: given, checked to be of :attr:`result_type`, or read
        back from a stored ``results.json`` body (``source`` names it in errors)."""
        if not isinstance(results, StudyResults):
            return self.result_type.from_json(results, source)
        if not isinstance(results, self.result_type):
            raise TypeError(f"not the {self.name} study's results: {type(results).__name__}")
        return results

    @abstractmethod
    def report(self, result: StudyResult, ctx: RunContext) -> str:
        """The HTML report (self-contained: inline figures)."""

    def analysis_inputs(self, cfg: DictConfig) -> dict[str, Any]:
        """Files besides the measurements that an analysis reads (name -> ``{"path", "sha256"}``),
        recorded in the audit record's analyze section. Default: none."""
        return {}

    def audit_section(self, result: StudyResult) -> dict[str, Any] | None:
        """A section of the audit record under the study's name (None: no section)."""
        return None

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        """Figure data for ``dvc plots``: one table (list of rows) per figure."""
        return {}

    def results_template(self, cfg: DictConfig) -> Mapping[str, Any] | None:
        """A results body of this plan's exact shape (no model), so that a registration's
        predictions can be checked at freeze time to name real result fields. None: not checked."""
        return None

    # --- sweeps -------------------------------------------------------------------------

    def design_key(self, cfg: DictConfig) -> str | None:
        """Jobs of a sweep with the same non-None key split one design across processes and
        are analysed together when the sweep ends (:meth:`combine_sweep`)."""
        return None

    def combine_sweep(self, cfgs: list[DictConfig], run_dirs: list[Path], out: Path) -> DictConfig:
        """Write the merged measurements of jobs sharing one design under ``out`` and return
        the config that analyses them (``stage=analyze``). Raises :class:`NotCombinable`."""
        raise NotCombinable(f"the {self.name} study does not combine sweep jobs")
