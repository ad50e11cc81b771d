"""MLflow logging: one run per job in a SQLite store under ``mlruns/``.

MLflow 3 refuses the old ``./mlruns`` file store, so the backend store is
``sqlite:///<mlruns>/mlflow.db`` and artifacts live under ``<mlruns>/artifacts``; the
tracking URI is always set explicitly (never taken from the environment by accident).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lmaudit.provenance.redact import redact_config, redact_text
from lmaudit.runtime import long_lived


def tracking_uri(mlruns: str | Path) -> str:
    db = Path(mlruns).resolve() / "mlflow.db"
    return f"sqlite:///{db}"


def mlflow_settings() -> None:
    """The environment lmaudit gives MLflow (read when MLflow is imported), where not set."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # MLflow 3 reports usage to its developers unless told not to; an audit's records stay here
    # (set MLFLOW_DISABLE_TELEMETRY=false to opt in)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def _mlflow(mlruns: str | Path) -> Any:
    mlflow_settings()
    if "mlflow.store.tracking.sqlalchemy_store" not in sys.modules:
        with long_lived():
            import mlflow.store.tracking.sqlalchemy_store  # the SQLite store, else loaded on first use
    import mlflow

    Path(mlruns).mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(tracking_uri(mlruns))
    return mlflow


def ensure_experiment(mlruns: str | Path, name: str) -> str:
    mlflow = _mlflow(mlruns)
    exp = mlflow.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    artifacts = (Path(mlruns).resolve() / "artifacts").as_uri()
    try:
        return str(mlflow.create_experiment(name, artifact_location=artifacts))
    except Exception:  # created concurrently by another job
        exp = mlflow.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


RUN_DIR_TAG = "lmaudit.run_dir"  # the run directory a job's run belongs to, set when it is created


def start_job(
    *,
    mlruns: str | Path,
    experiment: str,
    run_name: str,
    parent_run_id: str | None = None,
    run_dir: str | None = None,
) -> str:
    """Create the job's MLflow run (so its id can go into the report) and return its id."""
    mlflow = _mlflow(mlruns)
    exp_id = ensure_experiment(mlruns, experiment)
    tags = {"lmaudit.kind": "job"}
    if run_dir is not None:
        tags[RUN_DIR_TAG] = run_dir
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    run = mlflow.start_run(experiment_id=exp_id, run_name=run_name, tags=tags)
    mlflow.end_run(status="RUNNING")
    return str(run.info.run_id)


def log_run(
    *,
    mlruns: str | Path,
    run_id: str,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
    artifacts: list[Path],
) -> str:
    """Log a job into its started run ``run_id``: params (flattened), finite metrics, tags and
    artifact files or folders; returns the run id."""
    mlflow = _mlflow(mlruns)
    safe_tags = {k: redact_text(str(v)) for k, v in tags.items()}
    with mlflow.start_run(run_id=run_id, tags=safe_tags) as run:
        flat = {
            k: redact_text("" if v is None else str(v))[:6000]
            for k, v in flatten(redact_config(params)).items()
        }
        if flat:
            mlflow.log_params(flat)
        finite = {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}
        if finite:
            mlflow.log_metrics(finite)
        for path in artifacts:
            p = Path(path)
            if p.is_dir():
                mlflow.log_artifacts(str(p), artifact_path=p.name)
            elif p.exists():
                mlflow.log_artifact(str(p))
        return str(run.info.run_id)


def fail_job(mlruns: str | Path, run_id: str, status: str = "FAILED") -> None:
    """Mark a job's run FAILED (its report or logging raised after the run was started) or
    KILLED (a signal stopped it)."""
    with contextlib.suppress(Exception):  # never mask the error that got us here
        _mlflow(mlruns).tracking.MlflowClient().set_terminated(run_id, status=status)


def close_running(mlruns: str | Path, experiment: str, run_dir: str, status: str = "KILLED") -> list[str]:
    """Mark ``status`` every job run of ``run_dir`` still RUNNING: runs of a process that was
    killed before it could say so (the run directory's lock guarantees no live process owns
    them). Returns their ids."""
    client = _mlflow(mlruns).tracking.MlflowClient()
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], filter_string="attributes.status = 'RUNNING'")
    ids = [r.info.run_id for r in runs if r.data.tags.get(RUN_DIR_TAG) == run_dir]
    for run_id in ids:
        client.set_terminated(run_id, status=status)
    return ids
