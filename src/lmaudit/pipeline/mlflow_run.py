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
import datetime as _dt
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError, Terminated
from lmaudit.pipeline.audit import AuditRecord, epoch_ms, utc_now, utc_now_ms
from lmaudit.pipeline.context import experiment_name, run_name
from lmaudit.pipeline.record import hold_sigterm, release_sigterm, signals_raise
from lmaudit.pipeline.rundir import ARTIFACTS, run_lock
from lmaudit.prereg import prediction_metrics, prediction_tags
from lmaudit.provenance.io import read_json
from lmaudit.provenance.measured_model import read_measured_model
from lmaudit.provenance.redact import redact_text
from lmaudit.studies.base import RunContext, Study, StudyResult
from lmaudit.studies.registry import get_study
from lmaudit.terminal import printable
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


def _command() -> tuple[str, str]:
    """The program that recorded the run (``run.py``, resolved) and its command line: a
    sweep job's own overrides after ``python run.py``, else the process's command line."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    prog = str(Path(sys.argv[0]).resolve()) if sys.argv and sys.argv[0] else ""
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        # Hydra escapes a sweep job's override values (``\:``): undone, so a URL's
        # credentials are recognised and redacted
        task = [re.sub(r"\\(.)", r"\1", o) for o in HydraConfig.get().overrides.task]
        line = shlex.join(["python", Path(prog).name, *task])
    else:
        line = shlex.join(sys.orig_argv)
    return prog, redact_text(line)


def _starts(data: dict[str, Any]) -> list[int]:
    """When each stage recorded in an audit record began (ms since the epoch), where known."""
    plan, measure, analyze = (data.get(k) or {} for k in ("plan", "measure", "analyze"))
    found = [
        epoch_ms(plan.get("process_started_utc") or plan.get("written_utc")),
        epoch_ms(analyze.get("process_started_utc") or analyze.get("finished_utc")),
    ]
    total = (measure.get("seconds") or {}).get("total")
    end = epoch_ms(measure.get("finished_utc"))
    if end is not None and isinstance(total, int | float):
        found.append(end - int(total * 1000))
    return [t for t in found if t is not None]


def run_span(data: dict[str, Any], started_utc: str) -> dict[str, str]:
    """The run's start (its earliest recorded stage, or ``started_utc``, this process's start)
    and end (now, its report written), for the audit record's report section."""
    own = epoch_ms(started_utc)
    first = min([*_starts(data), *([] if own is None else [own])])
    start = _dt.datetime.fromtimestamp(first / 1000, _dt.UTC).isoformat(timespec="milliseconds")
    return {"run_started_utc": start.replace("+00:00", "Z"), "run_ended_utc": utc_now_ms()}


def run_times(data: dict[str, Any]) -> tuple[int | None, int | None]:
    """The run's start and end (ms since the epoch) as its audit record holds them; a record
    of an earlier version gives its stages' stamps (None: not known)."""
    report = data.get("report") or {}
    start = epoch_ms(report.get("run_started_utc")) or min(_starts(data), default=None)
    return start, epoch_ms(report.get("run_ended_utc")) or epoch_ms(report.get("written_utc"))


def measured_model(result: StudyResult, data: dict[str, Any]) -> str:
    """The model(s) a run measured: the study's word (an ensemble's members, the families of
    imported draws), else the audit record's measured model (its name, or "imported" when the
    run's data came from elsewhere without naming one)."""
    if result.tags.get("model"):
        return str(result.tags["model"])
    try:
        return read_measured_model(data).tag
    except InputError:  # a record that names no model
        return ""


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
    out["source"], out["command"] = _command()
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
        "params": study.tracked_params(sec["params"]),
        "metrics": {**result.metrics, **prediction_metrics(result)},
        "tags": {
            **result.tags,
            **prediction_tags(result),
            "plan_digest": str(audit.data.get("plan_digest")),
            "run_dir": str(out),
            "study": study.name,
            "model": measured_model(result, audit.data),
            "mlflow.note.content": result.summary[:5000],  # the run's description in MLflow
        },
        "artifacts": [out / n for n in RUN_FILES] + extra,
        "end_time": run_times(audit.data)[1],
    }


def _source_tags(sec: dict[str, Any]) -> dict[str, str]:
    """MLflow's source tags (the program that ran) and the command line, where recorded."""
    if not sec.get("source"):
        return {}
    command = str(sec.get("command") or "")[:5000]
    return {"mlflow.source.name": str(sec["source"]), "mlflow.source.type": "LOCAL", "command": command}


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    # a store's refusal may quote a key made of a name from imported data: controls escaped
    return printable(redact_text(f"{type(e).__name__}: {text[0] if text else ''}"))[:300]


def _end_status(e: BaseException) -> str:
    return "KILLED" if isinstance(e, (Terminated, KeyboardInterrupt, SystemExit)) else "FAILED"


def log_job(
    out: Path, study: Study, result: StudyResult, audit: AuditRecord, *, uri: str | None = None
) -> str | None:
    """Log the recorded run in ``out`` to MLflow (the section's store, or ``uri``); returns the
    run's id, or None when it could not be logged (said on the console and in the section)."""
    from lmaudit.tracking.mlflow_log import RUN_DIR_TAG, close_running, end_run, log_run, start_job, supersede
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
            uri=uri,
            experiment=experiment,
            run_name=str(sec["run_name"]),
            parent_run_id=parent,
            run_dir=where,
            start_time=run_times(audit.data)[0],
            tags=_source_tags(sec),
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
            for earlier in supersede(uri, experiment, run_id, "job", RUN_DIR_TAG, where):
                print(f"MLflow run {earlier} of {out} is superseded by run {run_id} (tag lmaudit.current)")
            log_run(uri=uri, run_id=run_id, **_payload(out, study, result, audit))
        except BaseException as e:  # the run's MLflow record says how it ended, never RUNNING
            try:
                end_run(uri, run_id, _end_status(e))
            except Exception as why:  # never mask the error that got us here; say what stays
                print(
                    f"warning: MLflow run {run_id} could not be marked {_end_status(e)} ({_one_line(why)}); "
                    "the next run of this folder marks it KILLED",
                    file=sys.stderr,
                )
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
    result = study.result(read_json(out / "results.json"), str(out / "results.json"))
    with signals_raise(), run_lock(out, "log"):  # no live run writes the directory meanwhile
        return log_job(out, study, result, audit, uri=uri)
