"""The record step: DVC views of a result, and the job's MLflow run (started before the
report is written, so the report can name it; marked FAILED if anything after that raises,
KILLED on a signal). Tracking failures are reported, never fatal to results and report."""

from __future__ import annotations

import contextlib
import csv
import io
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lmaudit.pipeline.audit import AuditRecord
from lmaudit.pipeline.context import experiment_name, run_name
from lmaudit.pipeline.registration import prediction_metrics, prediction_tags
from lmaudit.provenance.io import atomic_write_json, atomic_write_text
from lmaudit.provenance.redact import redact_text
from lmaudit.studies.base import RunContext, Study, StudyResult

RUN_FILES = ("plan.json", "results.json", "audit_record.json", "report.html", "measurements.jsonl")


def write_dvc_views(out: Path, study: Study, result: StudyResult) -> None:
    """``metrics.json`` (headline numbers) and ``plots/*.csv`` (figure data) for ``dvc metrics``
    and ``dvc plots``; both are pure views of results.json."""
    metrics = {**result.metrics, **prediction_metrics(result.results)}
    atomic_write_json(out / "metrics.json", metrics)
    for name, rows in study.plot_data(result).items():
        buf = io.StringIO()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        atomic_write_text(out / "plots" / f"{name}.csv", buf.getvalue())


def _sweep_dir() -> Path | None:
    """The sweep directory, when this job is part of a ``-m`` sweep."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return None
    return Path(hc.sweep.dir)


class Terminated(BaseException):
    """SIGTERM, raised where the run is (so its MLflow run is marked KILLED and its lock freed)."""


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM raises :class:`Terminated`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        what = f"signal {signal.Signals(signum).name}"
        if _DEFER.depth:
            _DEFER.pending = what
            return
        raise Terminated(what)

    old = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


class _Deferred:
    """A SIGTERM that arrived while the MLflow run was being created."""

    depth = 0
    pending: str | None = None


_DEFER = _Deferred()


def _hold_sigterm() -> bool:
    """From now on a SIGTERM is recorded, not raised (the handler runs in the main thread
    whichever thread the signal reached, so blocking the signal would not be enough)."""
    _DEFER.depth += 1
    return True


def _release_sigterm(held: bool) -> None:
    """Raise a SIGTERM recorded while held (now that the run's id is known)."""
    if not held:
        return
    _DEFER.depth = max(0, _DEFER.depth - 1)
    pending = _DEFER.pending
    if pending and not _DEFER.depth:
        _DEFER.pending = None
        raise Terminated(pending)


def _end_status(e: BaseException) -> str:
    return "KILLED" if isinstance(e, (Terminated, KeyboardInterrupt, SystemExit)) else "FAILED"


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    from lmaudit.tracking.worker import TrackingError  # its message names the original exception

    return redact_text(first if isinstance(e, TrackingError) else f"{type(e).__name__}: {first}")[:300]


def log_to_mlflow(
    ctx: RunContext,
    study: Study,
    result: StudyResult,
    audit: AuditRecord,
    write_report: Callable[[str | None], None],
    *,
    sweep_dir: Path | None,
    registration_file: Path | None,
) -> str | None:
    """Start the job's MLflow run (nested under the sweep's parent), write the report, log the
    run; returns its id (None with ``mlflow.enabled=false`` or when tracking failed).

    Tracking never stops results and report from being written: a store that cannot be reached,
    is locked or is damaged is reported (on the console and in the audit record's ``mlflow``
    section), and the run goes on. A run left RUNNING by an earlier, killed process in this run
    directory is marked KILLED; a signal during the report or logging marks this one KILLED."""
    cfg, out = ctx.cfg, ctx.run_dir
    if not cfg.mlflow.enabled:
        write_report(None)
        return None
    from lmaudit.tracking.mlflow_log import close_running, fail_job, log_run, start_job, tracking_uri
    from lmaudit.tracking.sweeps import sweep_parent
    from lmaudit.tracking.worker import call  # by the run's MLflow worker, if it has one

    def failed(run_id: str, status: str) -> None:
        with contextlib.suppress(Exception):  # never mask the error that got us here
            call(fail_job, cfg.paths.mlruns, run_id, status)

    experiment = experiment_name(cfg)
    uri = tracking_uri(cfg.paths.mlruns)
    problem: str | None = None
    run_id: str | None = None
    where = str(out.resolve())
    # SIGTERM is held while the run is created, so that a signal arriving then is raised below
    # with the run id known (and the run marked KILLED), never half-way through its creation
    held = _hold_sigterm()
    try:
        for earlier in call(close_running, cfg.paths.mlruns, experiment, where):
            print(f"MLflow run {earlier} of an earlier, interrupted run of {out} marked KILLED")
        sweep = sweep_dir or _sweep_dir()
        parent = call(sweep_parent, sweep, cfg.paths.mlruns, experiment) if sweep is not None else None
        run_id = call(
            start_job,
            mlruns=cfg.paths.mlruns,
            experiment=experiment,
            run_name=run_name(cfg),
            parent_run_id=parent,
            run_dir=where,
        )
    except Exception as e:
        problem = f"no MLflow run was started in {uri} ({_one_line(e)})"
    except BaseException:  # a signal while the run was being created: it must not stay RUNNING
        with contextlib.suppress(Exception):
            call(close_running, cfg.paths.mlruns, experiment, where)
        _release_sigterm(held)
        raise
    audit.data["mlflow"] = {"run_id": run_id, "experiment": experiment, "tracking_uri": uri}
    if problem:
        audit.data["mlflow"]["not_logged"] = problem
    audit.save()
    try:
        _release_sigterm(held)  # a SIGTERM held during creation is raised here
        write_report(run_id)
    except BaseException as e:
        if run_id is not None:
            failed(run_id, _end_status(e))
        raise
    if run_id is not None:
        try:
            plan_cfg = ctx.plan.config if ctx.plan is not None else study.plan_config(cfg)
            call(
                log_run,
                mlruns=cfg.paths.mlruns,
                run_id=run_id,
                params=plan_cfg,
                metrics={**result.metrics, **prediction_metrics(result.results)},
                tags={
                    **result.tags,
                    **prediction_tags(result.results),
                    "plan_digest": str(audit.data.get("plan_digest")),
                    "run_dir": str(out),
                    "study": study.name,
                },
                artifacts=[out / n for n in RUN_FILES]
                + ([out / "artifacts"] if (out / "artifacts").is_dir() else [])
                + ([registration_file] if registration_file is not None else []),
            )
        except BaseException as e:  # the run's MLflow record says how it ended, never RUNNING
            failed(run_id, _end_status(e))
            if not isinstance(e, Exception):
                raise
            problem = f"MLflow run {run_id} is marked FAILED: its params, metrics, tags or artifacts were not all logged ({_one_line(e)})"
            audit.data["mlflow"]["not_logged"] = problem
            audit.save()
    if problem:
        print(f"warning: {problem}; results.json and report.html are written in {out}", file=sys.stderr)
        return None
    print(f"MLflow run {run_id} ({uri})")
    return run_id
