"""What a run's analysis speaks of: the model (and the study's measured groups) that answered
the measurements it reads.

The run's config is derived here once, before the run's context exists, and never replaced
during the run: for ``stage=analyze|report`` without a registration, the model recorded in the
plan beside the measurements (or, with no plan, the measurements' source) names the run folder,
the MLflow run and the audit record, never the command line's default model. A registered
analysis is refused instead when its measurements' model differs from the registered one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from lmaudit.config.execution import without_execution
from lmaudit.errors import InputError
from lmaudit.pipeline.context import run_dir, study_of
from lmaudit.pipeline.rundir import diff_keys
from lmaudit.provenance.io import read_json
from lmaudit.provenance.jsoncheck import bounded_loads
from lmaudit.provenance.measured_model import MeasuredModel, read_run_measured_model
from lmaudit.provenance.redact import redact_config
from lmaudit.studies.base import Plan, RunContext, Study


def source_of(path: Path) -> str:
    """A measurement file's source: its first record's ``source`` field, else its name (the
    folder's, for a file named measurements.jsonl)."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    first = bounded_loads(line)
                except ValueError:
                    break
                if isinstance(first, dict) and isinstance(first.get("source"), str) and first["source"]:
                    return str(first["source"])
                break
    return path.parent.name if path.stem == "measurements" else path.stem


def by_source(cfg: DictConfig, out: Path | None = None) -> DictConfig:
    """``stage=analyze measurements=<file>`` with no plan beside the file (and no registration):
    the config with the file's source as its model and run name (``run_name=`` wins), so that
    the run folder, the MLflow run and the report name what was measured, never the config's
    default model. ``out``: the run folder when known. Else ``cfg`` itself."""
    if cfg.get("stage") not in ("analyze", "report") or not cfg.get("measurements") or cfg.get("prereg"):
        return cfg
    path = Path(cfg.measurements)
    model = cfg.get("model")
    if (
        (path.parent / "plan.json").exists()
        or not path.is_file()
        or model is None
        or model.get("backend") == "import"
    ):
        return cfg
    out = out or (Path(cfg.out_dir) if cfg.get("out_dir") else None)
    if out is not None and path.resolve().parent == out.resolve():
        return cfg
    name = str(cfg.get("run_name") or source_of(path))
    print(f"{path}: measurements of {name!r} (no plan beside them); recorded under that name")
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.model = OmegaConf.create({"backend": "import", "name": name})
        cfg.run_name = re.sub(r"[^A-Za-z0-9._+-]+", "-", name).strip("-.") or "measurements"
    return cfg


def measured_plan(cfg: DictConfig, out: Path) -> tuple[Path, dict[str, Any]] | None:
    """The plan the measurements being analysed were made under: ``plan.json`` beside them."""
    m = Path(cfg.measurements) if cfg.get("measurements") else out / "measurements.jsonl"
    p = m.parent / "plan.json"
    return (p, read_json(p)) if p.exists() else None


def measured_under(cfg: DictConfig, out: Path) -> dict[str, Any] | None:
    """For the audit record: the plan and model the analysed measurements were made under."""
    found = measured_plan(cfg, out)
    if found is None:
        return None
    path, doc = found
    try:
        model: str | None = read_run_measured_model(path.parent).name
    except InputError:  # a plan that names no model
        model = None
    return {"plan": str(path), "plan_digest": doc.get("plan_digest"), "model": model}


def measured_model_record(ctx: RunContext, study: Study, audit: dict[str, Any]) -> MeasuredModel:
    """The run's measured model, for its audit record: the model of the run's plan (of the
    config, without one), with the identity of the backend that answered in this run folder."""
    params = ctx.plan.config if ctx.plan is not None else study.plan_config(ctx.cfg)
    model = params.get("model")
    model = model if isinstance(model, dict) else {}
    measure = audit.get("measure") or {}
    identity = measure.get("backend_identity") or {}
    digest = measure.get("backend_digest")
    return MeasuredModel(
        name=str(model.get("name") or identity.get("model") or identity.get("agent") or ""),
        backend=None if model.get("backend") is None else str(model["backend"]),
        identity=identity,
        digest=None if digest is None else str(digest),
        imported=bool(measure) and measure.get("backend") is None and not identity,
    )


def check_measured_model(ctx: RunContext, plan: Plan | None, registration: Path | None) -> None:
    """With a registration: refuse measurements made with another model than the registered one
    (a registration scores only measurements of its own model)."""
    if registration is None or plan is None:
        return
    found = measured_plan(ctx.cfg, ctx.run_dir)
    if found is None:
        return
    path, measured = found
    model = (measured.get("config") or {}).get("model")
    if not isinstance(model, dict):
        return
    diffs = diff_keys(plan.config.get("model"), model)
    if diffs:
        raise InputError(
            f"{path}: the measurements were made with another model than {registration} registers "
            f"(differs in: {', '.join('model.' + d if d else 'model' for d in diffs)}); "
            "a registration scores only measurements of its own model"
        )


def _as_measured(cfg: DictConfig, plan_path: Path, config: dict[str, Any]) -> DictConfig:
    """``cfg`` with the model, and each of the study's measured groups, recorded in the plan
    at ``plan_path`` (``config``: its resolved, redacted config) where they are not the
    config's own."""
    model = config.get("model")
    if isinstance(model, dict):
        current = without_execution(OmegaConf.to_container(cfg.model, resolve=True))
        if diff_keys(redact_config(current), model):
            print(
                f"{plan_path}: analysing measurements of model {model.get('name')!r} "
                f"(not the config's {cfg.model.name!r})"
            )
            cfg = cfg.copy()
            with open_dict(cfg):
                cfg.model = OmegaConf.create(model)
    study = study_of(cfg)
    for group in study.measured_groups:  # after the model: a group may name ${model}
        recorded = config.get(group)
        mine = OmegaConf.to_container(cfg.study[group], resolve=True)
        if isinstance(recorded, dict) and diff_keys(redact_config(mine), recorded):
            print(
                f"{plan_path}: analysing measurements of {group} {recorded.get('name')!r} "
                f"(not the config's {cfg.study[group].get('name')!r})"
            )
            cfg = cfg.copy()
            with open_dict(cfg):
                cfg.study[group] = OmegaConf.merge(OmegaConf.structured(study.groups[group]), recorded)
    return cfg


def by_measured_model(cfg: DictConfig) -> DictConfig:
    """``stage=analyze|report measurements=<file>`` with a plan beside the file and no
    registration: the config with the plan's model (and measured groups), before the run
    folder is named, so that the folder, like the MLflow run and the audit record, names what
    was measured (never the config's default). Else ``cfg`` itself."""
    if cfg.get("stage") not in ("analyze", "report") or not cfg.get("measurements") or cfg.get("prereg"):
        return cfg
    plan_path = Path(cfg.measurements).parent / "plan.json"
    if not plan_path.is_file() or not isinstance(cfg.get("model"), DictConfig):
        return cfg
    config = read_json(plan_path).get("config")
    return _as_measured(cfg, plan_path, config) if isinstance(config, dict) else cfg


def run_config(cfg: DictConfig) -> tuple[DictConfig, Path]:
    """The config the run reads, and its folder: derived once, before the run's context exists,
    and never replaced during the run. Provenance of an analysis comes from what was measured,
    not from the command line: for ``stage=analyze|report`` without a registration, the model
    (and the study's :attr:`~lmaudit.studies.base.Study.measured_groups`, e.g. choir's ensemble)
    recorded in the plan of the measurements analysed (beside ``measurements=``, else the run
    folder's) replace the config's, and measurements with no plan are named by their source."""
    cfg = by_source(cfg)  # measurements with no plan: the folder and names follow their source
    cfg = by_measured_model(cfg)  # measurements with a plan: they follow the plan's model
    out = run_dir(cfg)
    # a registered analysis is refused instead when its measurements' model differs
    # (:func:`_check_measured_model`); a report reads the results the analysis wrote
    registered = cfg.get("prereg") is not None and cfg.get("stage") != "report"
    found = measured_plan(cfg, out) if cfg.get("stage") in ("analyze", "report") else None
    if found is not None and not registered:
        plan_path, measured = found
        config = measured.get("config")
        if isinstance(config, dict) and isinstance(config.get("model"), dict):
            cfg = _as_measured(cfg, plan_path, config)
    return cfg, out
