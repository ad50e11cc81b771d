"""The one pipeline every study follows: plan -> (freeze) -> measure -> analyze -> report + record.

Each stage reads what the previous one wrote in the run directory, so stages run one at a time
(``stage=plan|measure|analyze|report``) or together (``stage=all``). The plan is built once per
run and validates every input before the run directory exists; the study sees the run only
through its :class:`RunContext`, and every run file is written here.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from lmaudit import prereg
from lmaudit.backends.registry import serve_if_secondary
from lmaudit.config.checks import validate
from lmaudit.errors import InputError, PreregError
from lmaudit.pipeline.audit import AuditRecord, environment, utc_now, utc_now_ms
from lmaudit.pipeline.context import must_be_folder, path_component, study_of
from lmaudit.pipeline.measured import check_measured_model, measured_model_record, measured_under, run_config
from lmaudit.pipeline.mlflow_run import log_job, run_span
from lmaudit.pipeline.mlflow_run import section as mlflow_section
from lmaudit.pipeline.record import signals_raise, write_dvc_views
from lmaudit.pipeline.rundir import (
    ARTIFACTS,
    claim_folder,
    claim_plan,
    claim_results,
    clear_from,
    run_lock,
)
from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    read_json,
)
from lmaudit.provenance.measured_model import SECTION as MEASURED_MODEL
from lmaudit.provenance.measured_model import MeasuredModel
from lmaudit.studies.base import Measured, Measurements, Plan, RunContext, Study
from lmaudit.terminal import printable

STAGES = ("plan", "freeze", "measure", "analyze", "report", "all")


def _write_artifacts(out: Path, files: dict[str, bytes], *, frozen: bool) -> list[str]:
    """Write a study's files under ``artifacts/``. ``frozen``: a file already there for this
    plan must be byte-identical (protocol files are a pure function of the plan), else the
    protocol was edited after freezing and the run is refused."""
    root = out / ARTIFACTS
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        p = root / rel
        if root.resolve() not in p.resolve().parents:
            raise InputError(f"artifact path {rel!r} leaves the run's {ARTIFACTS}/ folder")
        if frozen and p.exists() and p.read_bytes() != data:
            raise InputError(
                f"{p}: differs from the content frozen for this plan; the protocol was edited "
                "after freezing (re-plan into a new run folder)"
            )
    for rel, data in files.items():
        atomic_write_bytes(root / rel, data)
    return sorted(files)


def _measure(ctx: RunContext, study: Study, plan: Plan, audit: AuditRecord) -> None:
    from lmaudit.backends.cached import CachedBackend
    from lmaudit.backends.registry import build_backend
    from lmaudit.pipeline.backends import Backends
    from lmaudit.provenance.cache import ResponseCache
    from lmaudit.provenance.compact import after_measure

    cfg, out = ctx.cfg, ctx.run_dir
    t0 = time.perf_counter()
    frozen = _write_artifacts(out, study.artifacts(plan), frozen=True)  # before any model call
    cache = ResponseCache(Path(cfg.paths.cache))
    section: dict[str, Any]
    if not study.needs_backend(cfg):  # no run model: imported measurements, or the study opens its own
        opened = Backends(cache, None, ctx.progress)
        try:
            measured = study.measure(plan, None, ctx.with_backends(opened))
        finally:
            opened.close()
        section = {
            "backend": None,
            "imported": not plan.n_requests,
            "cache": {"dir": str(cache.root), **cache.stats.as_dict()},
            "seconds": {"total": round(time.perf_counter() - t0, 3)},
        }
    else:
        backend = build_backend(cfg.model)
        t_load = time.perf_counter() - t0
        batch = int(cfg.model.get("batch_size", 16))
        cached = CachedBackend(backend, cache, batch_size=batch, progress=ctx.progress)
        opened = Backends(cache, (cfg.model, cached), ctx.progress)
        model = MeasuredModel(
            name=str(cfg.model.name),
            backend=str(cfg.model.backend),
            identity=backend.identity,
            digest=cached.digest,
        )
        try:
            measured = study.measure(plan, cached, ctx.with_backends(opened).with_measured_model(model))
        finally:
            opened.close()
            close = getattr(backend, "close", None)  # the Lightning runner's worker processes
            if callable(close):
                close()
        refused = opened.refusals()
        if refused:
            n = sum(refused.values())
            print(
                f"WARNING: the server answered {n} draw(s) without an answer ("
                + ", ".join(f"{k}: {v}" for k, v in refused.items())
                + "); recorded as refusals, never cached as answers",
                file=sys.stderr,
            )
        label_ids = sorted(
            {f"{k}={v}" for r in measured.rows for k, v in (r.get("label_token_ids") or {}).items()}
        )
        section = {
            "backend_identity": backend.identity,
            "backend_digest": cached.digest,
            "backend": cached.describe(),
            "label_token_ids": label_ids,
            "refused_draws": refused,
            "cache": {"dir": str(cache.root), **cache.stats.as_dict()},
            "seconds": {
                "load": round(t_load, 3),
                **{k: round(v, 3) for k, v in cached.seconds.items()},  # answering cache misses
                "total": round(time.perf_counter() - t0, 3),
            },
        }
    if not isinstance(measured, Measured):
        raise TypeError(f"{study.name}.measure returned {type(measured).__name__}, not Measured")
    clear_from(out, "analyze")  # results of earlier measurements go before the new ones land
    for later in ("analyze", "report", MEASURED_MODEL):
        audit.data.pop(later, None)
    path = atomic_write_jsonl(out / "measurements.jsonl", measured.rows)
    written = _write_artifacts(out, measured.artifacts, frozen=False)
    # the run completed (every request answered): record the keys it used, compact when asked
    section["cache"].update(after_measure(cache, out, compact_cache=bool(cfg.paths.cache_compact)))
    audit.update(
        "measure",
        {
            "finished_utc": utc_now(),
            **section,
            **measured.audit,
            "artifacts": sorted({*frozen, *written}),
            "measurements": {"path": str(path), "sha256": file_sha256(path), "rows": len(measured.rows)},
        },
    )


def _analyze(
    ctx: RunContext,
    study: Study,
    plan: Plan | None,
    reg: prereg.Registration | None,
    audit: AuditRecord,
    started: str,
) -> dict[str, Any]:
    cfg, out = ctx.cfg, ctx.run_dir
    mpath = Path(cfg.measurements) if cfg.measurements else out / "measurements.jsonl"
    if not mpath.exists():
        raise InputError(f"{mpath}: no measurement file; run stage=measure first or pass measurements=<path>")
    sha = file_sha256(mpath)
    claim_results(out, mpath, sha, overwrite=bool(cfg.get("overwrite", False)))
    # read by the study (whole, or one row at a time), before anything of the analysis is written
    result = study.analyze(cfg, Measurements(source=str(mpath), path=mpath))
    body = result.doc  # serialised (a NaN refused) before the previous analysis is removed
    clear_from(out, "analyze")  # results, metrics, plots and the report derived from them, as a set
    for later in ("analyze", "report"):
        audit.data.pop(later, None)
    audit.save()
    results = {**body, "source": {"measurements_sha256": sha}}
    if reg is not None:
        results = prereg.score_results(study.result(results), reg, plan, sha)
    results_path = atomic_write_json(out / "results.json", results)
    # from here on the results are the file's (its key order, its number formatting), so what
    # the run derives from them (views, report, MLflow) is what `lmaudit report` derives later
    results = read_json(results_path)
    write_dvc_views(out, study, study.result(results, str(results_path)))
    audit.update(
        "analyze",
        {
            "process_started_utc": started,
            "finished_utc": utc_now(),
            "measurements": str(mpath),
            "measurements_sha256": sha,
            "measured_under": measured_under(cfg, out),
            "inputs": study.analysis_inputs(cfg),
            "results_sha256": file_sha256(results_path),
        },
    )
    return results


def _print_predictions(results: dict[str, Any]) -> None:
    """A registered run ends with each prediction's outcome; when none could be evaluated (the
    data do not hold what the registration speaks of) it says so loudly."""
    preds = results.get("predictions")
    if not preds:
        return
    name = (results.get("prereg") or {}).get("name", "?")
    print(f"registered predictions ({name}):")
    for p in preds:
        why = f" ({p['reason']})" if p.get("outcome") == "not evaluable" and p.get("reason") else ""
        print(printable(f"  {p.get('id')}: {p.get('outcome')}{why}; observed {p.get('observed')!r}"))
    if all(p.get("outcome") == "not evaluable" for p in preds):
        print(
            f"WARNING: none of the {len(preds)} predictions of registration {name!r} could be evaluated: "
            "the results do not hold the metrics they name (e.g. family names that match no data). "
            "Nothing was tested.",
            file=sys.stderr,
        )


def _registration(cfg: DictConfig, study: Study, plan: Plan | None) -> prereg.Registration | None:
    """The pipeline's one call into pre-registration before measuring: ``stage=freeze`` freezes
    the plan and its predictions; any other stage with ``prereg=<name>`` and a plan refuses a
    plan or predictions that differ from the frozen ones (before any model call)."""
    if cfg.prereg is None:
        if cfg.stage == "freeze":
            raise PreregError("stage=freeze needs a registration: add prereg=<name> (a file in conf/prereg/)")
        return None
    name = path_component(str(cfg.prereg.name), "prereg.name")
    if cfg.stage == "freeze":
        assert plan is not None
        prereg.freeze(cfg, study, plan, name)
        return None
    return prereg.check(cfg, study, plan, name) if plan is not None else None


def run(cfg: DictConfig, *, sweep_dir: Path | None = None) -> float | None:
    """Run the configured stage(s); returns the study's headline metric.

    ``sweep_dir``: the ``-m`` sweep this run belongs to (found from Hydra when not given); its
    MLflow run nests under the sweep's parent run."""
    validate(cfg)  # every ranged field, before a plan is built or a run directory exists
    started = utc_now_ms()  # the run's start, as its MLflow run records it
    stage = str(cfg.stage)
    if stage not in STAGES:
        raise InputError(f"stage={stage!r} is not one of {', '.join(STAGES)}")
    model = cfg.get("model")
    # a process other than the first of a multi-process runner (a SLURM task other than 0) only
    # answers the runner's jobs
    if stage in {"measure", "all"} and isinstance(model, DictConfig) and serve_if_secondary(model):
        return None
    study = study_of(cfg)
    cfg, out = run_config(cfg)
    must_be_folder(out, "out_dir" if cfg.get("out_dir") else "the run folder")
    if stage in {"measure", "all"}:
        must_be_folder(Path(cfg.paths.cache), "paths.cache")
    freezing_open = stage == "freeze" and cfg.prereg is not None and cfg.prereg.data == "open"
    ctx = RunContext(cfg=cfg, stage=stage, run_dir=out, freezing_open=freezing_open)
    # the plan validates every input: bad input is refused before the run directory exists
    plan = study.plan(ctx) if stage != "report" and (stage != "analyze" or cfg.prereg is not None) else None
    reg = _registration(cfg, study, plan)
    if stage == "freeze":
        return None
    with signals_raise(), run_lock(out, stage):
        return _run_locked(ctx, study, plan, reg, sweep_dir, started)


def _run_locked(
    ctx: RunContext,
    study: Study,
    plan: Plan | None,
    reg: prereg.Registration | None,
    sweep_dir: Path | None,
    started: str,
) -> float | None:
    cfg, out, stage = ctx.cfg, ctx.run_dir, ctx.stage
    print(f"lmaudit {study.name}: stage={stage} run dir {out}")
    claim_folder(out)
    if plan is not None and claim_plan(out, plan.doc, overwrite=bool(cfg.get("overwrite", False))):
        clear_from(out, "plan")
        (out / "audit_record.json").unlink(missing_ok=True)
    if stage in ("plan", "measure", "all"):
        assert plan is not None
        atomic_write_json(out / "plan.json", plan.doc)
    elif (out / "plan.json").exists():
        plan = Plan.from_json(read_json(out / "plan.json"))
    if stage in ("analyze", "report"):
        check_measured_model(ctx, plan, reg.path if reg is not None else None)
    ctx = ctx.with_plan(plan)
    audit = AuditRecord(out / "audit_record.json", plan.digest if plan else None)
    if plan is not None and stage in ("plan", "measure", "all"):
        audit.update(
            "plan",
            {
                "process_started_utc": started,
                "written_utc": utc_now(),
                "plan_digest": plan.digest,
                "inputs": plan.inputs,
                "n_requests": plan.n_requests,
                **environment(),
            },
        )
    if stage == "plan":
        return None
    if stage in ("measure", "all"):
        assert plan is not None
        _measure(ctx, study, plan, audit)
        if stage == "measure":
            return None

    results_path = out / "results.json"
    if stage in ("analyze", "all"):
        results = _analyze(ctx, study, plan, reg, audit, started)
    elif not results_path.exists():
        raise InputError(f"{results_path}: no results; run stage=analyze first")
    else:
        results = read_json(results_path)
    result = study.result(results, str(results_path))
    section = study.audit_section(result)
    if section is not None:
        audit.data[study.name] = section
        audit.save()

    audit.data[MEASURED_MODEL] = measured_model_record(ctx, study, audit.data).to_json()
    # how the run is logged to MLflow (now, or later by `lmaudit log`), recorded before the report
    audit.data["mlflow"] = mlflow_section(
        ctx, study, sweep_dir=sweep_dir, registration_file=reg.path if reg else None
    )
    html = study.report(result, ctx.with_audit(audit.data))
    path = atomic_write_text(out / "report.html", html)
    written = {"written_utc": utc_now(), "report_sha256": file_sha256(path)}
    audit.update("report", {**written, **run_span(audit.data, started)})  # the run's start and end
    print(printable(result.summary))  # names from imported data: controls escaped
    _print_predictions(result.doc)
    names = ("plan.json", "measurements.jsonl", "results.json", "audit_record.json", "report.html")
    print(f"wrote {out}/{{{', '.join(n for n in names if (out / n).exists())}}}")
    if cfg.mlflow.enabled:  # last: a store that is down or locked never stops results or report
        log_job(out, study, result, audit)
    return result.headline
