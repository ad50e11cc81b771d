"""MLflow logging: one run per job, made in the run's own process through ``MlflowClient``.

MLflow 3 refuses the old ``./mlruns`` file store, so lmaudit's store is
``sqlite:///<mlruns>/mlflow.db`` with artifacts under ``<mlruns>/artifacts``; the tracking URI
is always passed explicitly (never taken from the environment, never set globally). MLflow
is imported on the first call, so a run that does not log never imports it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lmaudit.provenance.redact import redact_config, redact_text

#: the run directory a job's run belongs to (resolved), set when the run is created
RUN_DIR_TAG = "lmaudit.run_dir"
_SQLITE = "sqlite:///"


def tracking_uri(mlruns: str | Path) -> str:
    """The tracking URI of lmaudit's store under the folder ``mlruns``."""
    return f"{_SQLITE}{Path(mlruns).resolve() / 'mlflow.db'}"


def mlflow_settings() -> None:
    """The environment lmaudit gives MLflow (read when MLflow is imported), where not set."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # MLflow 3 reports usage to its developers unless told not to; an audit's records stay here
    # (set MLFLOW_DISABLE_TELEMETRY=false to opt in)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def client(uri: str) -> Any:
    """An ``MlflowClient`` of the store at ``uri`` (a SQLite store's folder is made first)."""
    mlflow_settings()
    from mlflow.tracking import MlflowClient

    if uri.startswith(_SQLITE):
        Path(uri[len(_SQLITE) :]).parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=uri)


def _artifact_location(uri: str) -> str | None:
    """``<mlruns>/artifacts`` beside a SQLite store; other stores choose their own."""
    if not uri.startswith(_SQLITE):
        return None
    return (Path(uri[len(_SQLITE) :]).parent / "artifacts").as_uri()


def ensure_experiment(uri: str, name: str) -> str:
    """The id of experiment ``name``, created if it does not exist yet."""
    c = client(uri)
    exp = c.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    try:
        return str(c.create_experiment(name, artifact_location=_artifact_location(uri)))
    except Exception:  # created concurrently by another job
        exp = c.get_experiment_by_name(name)
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


def start_run(uri: str, experiment: str, run_name: str, tags: Mapping[str, str]) -> str:
    """Create a RUNNING run in ``experiment`` and return its id."""
    run = client(uri).create_run(ensure_experiment(uri, experiment), run_name=run_name, tags=dict(tags))
    return str(run.info.run_id)


def start_job(
    *, uri: str, experiment: str, run_name: str, parent_run_id: str | None = None, run_dir: str | None = None
) -> str:
    """Create a job's run (nested under ``parent_run_id``) and return its id."""
    tags = {"lmaudit.kind": "job"}
    if run_dir is not None:
        tags[RUN_DIR_TAG] = run_dir
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    return start_run(uri, experiment, run_name, tags)


def log_run(
    *,
    uri: str,
    run_id: str,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
    artifacts: list[Path],
) -> None:
    """Log into the started run ``run_id``: params (flattened, credentials redacted), finite
    metrics, tags and artifact files or folders; then mark it FINISHED."""
    from mlflow.entities import Metric, Param, RunTag

    c = client(uri)
    flat = {
        k: redact_text("" if v is None else str(v))[:6000] for k, v in flatten(redact_config(params)).items()
    }
    now = int(time.time() * 1000)
    finite = {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}
    c.log_batch(
        run_id,
        metrics=[Metric(k, v, now, 0) for k, v in finite.items()],
        params=[Param(k, v) for k, v in flat.items()],
        tags=[RunTag(k, redact_text(str(v))) for k, v in tags.items()],
    )
    for path in map(Path, artifacts):
        if path.is_dir():
            c.log_artifacts(run_id, str(path), artifact_path=path.name)
        elif path.exists():
            c.log_artifact(run_id, str(path))
    c.set_terminated(run_id, status="FINISHED")


def end_run(uri: str, run_id: str, status: str) -> None:
    """Mark a run FAILED (its logging raised after it was started) or KILLED (a signal)."""
    client(uri).set_terminated(run_id, status=status)


def close_running(uri: str, experiment: str, run_dir: str, status: str = "KILLED") -> list[str]:
    """Mark ``status`` every job run of ``run_dir`` still RUNNING: runs of a process that was
    killed before it could say so (the run directory's lock guarantees no live process owns
    them). Returns their ids."""
    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = c.search_runs([exp.experiment_id], filter_string="attributes.status = 'RUNNING'")
    ids = [r.info.run_id for r in runs if r.data.tags.get(RUN_DIR_TAG) == run_dir]
    for run_id in ids:
        c.set_terminated(run_id, status=status)
    return ids
