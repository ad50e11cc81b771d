"""The job's MLflow run, logged in the run's own process once results.json and report.html are
written, or later from the run directory (``lmaudit log <run dir>``).

The audit record's ``mlflow`` section holds what the logging needs beside ``results.json``
(store, experiment, run name, params, sweep, registration), written before the report, so
that a run directory can always be logged later with the same params and metrics. Tracking
never stops or alters results and report: a store that is down, locked or damaged is
reported in one line on the console and in the section (``not_logged``, ``log_later``), and
the run goes on. A run left RUNNING in the store by an earlier, killed process of the same run
directory is marked KILLED; a signal during the logging marks this one KILLED.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from lmaudit.pipeline.audit import AuditRecord, utc_now
from lmaudit.pipeline.context import experiment_name, run_name
from lmaudit.pipeline.record import Terminated, hold_sigterm, release_sigterm, signals_raise
from lmaudit.pipeline.registration import prediction_metrics, prediction_tags
from lmaudit.pipeline.rundir import ARTIFACTS, run_lock
from lmaudit.provenance.io import InputError, read_json
from lmaudit.provenance.redact import redact_text
from lmaudit.studies.base import RunContext, Study, StudyResult
from lmaudit.studies.registry import get_study
from lmaudit.tracking.mlflow_log import tracking_uri

#: the run's files logged as artifacts (with its ``artifacts/`` folder and its registration)
RUN_FILES = ("plan.json", "results.json", "audit_record.json", "report.html", "measurements.jsonl")


def _sweep_dir() -> Path | None:
    """The sweep directory, when this job is part of a ``-m`` sweep."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    return Path(hc.sweep.dir) if hc.mode == RunMode.MULTIRUN else None


def log_later(out: Path) -> str:
    return f"lmaudit log {out}"


def section(
    ctx: RunContext, study: Study, *, sweep_dir: Path | None, registration_file: Path | None
) -> dict[str, Any]:
    """The audit record's ``mlflow`` section of a run about to be recorded (``run_id`` is set
    once the run is logged)."""
    cfg = ctx.cfg
    sweep = sweep_dir or _sweep_dir()
    out: dict[str, Any] = {
        "run_id": None,
        "tracking_uri": tracking_uri(cfg.paths.mlruns),
        "experiment": experiment_name(cfg),
        "run_name": run_name(cfg),
        "study": study.name,
        "sweep_dir": None if sweep is None else str(Path(sweep).resolve()),
        "registration": None if registration_file is None else str(Path(registration_file).resolve()),
        "params": ctx.plan.config if ctx.plan is not None else study.plan_config(cfg),
    }
    if not cfg.mlflow.enabled:
        out.update(not_logged="mlflow.enabled=false", log_later=log_later(ctx.run_dir))
    return out


def _payload(out: Path, study: Study, result: StudyResult, audit: AuditRecord) -> dict[str, Any]:
    """What the job's run gets: params, metrics, tags and artifacts."""
    sec = audit.data["mlflow"]
    extra = [out / ARTIFACTS] if (out / ARTIFACTS).is_dir() else []
    if sec.get("registration"):
        extra.append(Path(sec["registration"]))
    return {
        "params": sec["params"],
        "metrics": {**result.metrics, **prediction_metrics(result.results)},
        "tags": {
            **result.tags,
            **prediction_tags(result.results),
            "plan_digest": str(audit.data.get("plan_digest")),
            "run_dir": str(out),
            "study": study.name,
        },
        "artifacts": [out / n for n in RUN_FILES] + extra,
    }


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return redact_text(f"{type(e).__name__}: {text[0] if text else ''}")[:300]


def _end_status(e: BaseException) -> str:
    return "KILLED" if isinstance(e, (Terminated, KeyboardInterrupt, SystemExit)) else "FAILED"


def log_job(
    out: Path, study: Study, result: StudyResult, audit: AuditRecord, *, uri: str | None = None
) -> str | None:
    """Log the recorded run in ``out`` to MLflow (the section's store, or ``uri``); returns the
    run's id, or None when it could not be logged (said on the console and in the section)."""
    from lmaudit.tracking.mlflow_log import close_running, end_run, log_run, start_job
    from lmaudit.tracking.sweeps import sweep_parent

    sec = audit.data["mlflow"]
    same_store = uri is None or uri == sec["tracking_uri"]
    uri = uri or str(sec["tracking_uri"])
    experiment, where = str(sec["experiment"]), str(out.resolve())
    problem: str | None = None
    run_id: str | None = None
    # SIGTERM is held while the run is created, so that a signal arriving then is raised below
    # with the run id known (and the run marked KILLED), never half-way through its creation
    held = hold_sigterm()
    try:
        for earlier in close_running(uri, experiment, where):
            print(f"MLflow run {earlier} of an earlier, interrupted run of {out} marked KILLED")
        sweep = sec.get("sweep_dir") if same_store else None  # parent ids belong to the sweep's store
        parent = sweep_parent(sweep, uri, experiment) if sweep else None
        run_id = start_job(
            uri=uri, experiment=experiment, run_name=str(sec["run_name"]), parent_run_id=parent, run_dir=where
        )
    except Exception as e:
        problem = f"no MLflow run was started in {uri} ({_one_line(e)})"
    except BaseException:  # a signal while the run was being created: it must not stay RUNNING
        with contextlib.suppress(Exception):
            close_running(uri, experiment, where)
        release_sigterm(held)
        raise
    for key in ("not_logged", "log_later"):
        sec.pop(key, None)
    sec.update(run_id=run_id, tracking_uri=uri)
    if run_id is not None:
        sec["logged_utc"] = utc_now()
    else:
        sec.update(not_logged=problem, log_later=log_later(out))
    audit.save()  # before the audit record is logged as an artifact: it names its run
    if run_id is not None:
        try:
            release_sigterm(held)  # a SIGTERM held during creation is raised here
            log_run(uri=uri, run_id=run_id, **_payload(out, study, result, audit))
        except BaseException as e:  # the run's MLflow record says how it ended, never RUNNING
            with contextlib.suppress(Exception):  # never mask the error that got us here
                end_run(uri, run_id, _end_status(e))
            if not isinstance(e, Exception):
                raise
            problem = (
                f"MLflow run {run_id} is marked FAILED: its params, metrics, tags or artifacts "
                f"were not all logged ({_one_line(e)})"
            )
            audit.data["mlflow"].update(not_logged=problem, log_later=log_later(out))  # saving copies
            audit.save()
    else:
        release_sigterm(held)
    if problem:
        print(
            f"warning: {problem}; results.json and report.html are written in {out}; "
            f"to log the run later: {log_later(out)}",
            file=sys.stderr,
        )
        return None
    print(f"MLflow run {run_id} ({uri})")
    return run_id


def log_run_dir(out: Path, *, uri: str | None = None, again: bool = False) -> str | None:
    """``lmaudit log <run dir>``: log a finished run directory (results.json and report.html
    written) to the store its audit record names, or to ``uri``."""
    for name in ("results.json", "report.html", "audit_record.json"):
        if not (out / name).is_file():
            raise InputError(f"{out}: no {name}; not a finished run directory (run stage=report first)")
    audit = AuditRecord(out / "audit_record.json", None)
    sec = audit.data.get("mlflow")
    if not isinstance(sec, dict) or not {"experiment", "run_name", "study", "params"} <= set(sec):
        raise InputError(
            f"{out / 'audit_record.json'}: no 'mlflow' section saying how the run is logged "
            "(written by the record step of this version); run stage=report again to record it"
        )
    target = uri or str(sec["tracking_uri"])
    if sec.get("run_id") and not sec.get("not_logged") and target == sec["tracking_uri"] and not again:
        raise InputError(
            f"{out}: already logged as MLflow run {sec['run_id']} in {target}; pass --again to log it as another run"
        )
    study = get_study(str(sec["study"]))
    result = study.result(read_json(out / "results.json"))
    with signals_raise(), run_lock(out, "log"):  # no live run writes the directory meanwhile
        return log_job(out, study, result, audit, uri=uri)
