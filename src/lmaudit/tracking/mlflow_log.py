"""MLflow logging: one run per job, made in the run's own process through ``MlflowClient``.

MLflow 3 refuses the old ``./mlruns`` file store, so lmaudit's store is
``sqlite:///<mlruns>/mlflow.db`` with artifacts under ``<mlruns>/artifacts``; the tracking URI
is always passed explicitly (never taken from the environment, never set globally). MLflow
is imported on the first call, so a run that does not log never imports it.

MLflow creates and migrates a SQLite store's tables the first time a process opens it; two
processes doing so at once (the jobs of a parallel sweep on a fresh store) race the schema
migrations and can leave the store unusable. So a process opens a store first under an
exclusive file lock beside it (``<mlruns>/mlflow.db.lock``): one process creates and migrates
the tables, the others wait and find them made. A sweep opens its store before its first job.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lmaudit.provenance.redact import redact_config, redact_text

#: the run directory a job's run belongs to (resolved), set when the run is created
RUN_DIR_TAG = "lmaudit.run_dir"
#: "true" on the run that holds what its run directory (or sweep directory) holds now, "false"
#: on the earlier runs of the same directory, which also name the run that superseded them
CURRENT_TAG = "lmaudit.current"
SUPERSEDED_BY_TAG = "lmaudit.superseded_by"
#: how MLflow 3 types an experiment (its UI opens a model-training experiment on its runs,
#: not on the GenAI traces page)
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
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
    # MLflow's INFO lines (creating or upgrading the SQLite store's tables) would interleave with
    # the run's own output; its warnings and errors still show (MLFLOW_LOGGING_LEVEL=INFO for all)
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")


#: the stores this process has opened (made and migrated under the lock)
_OPENED: set[str] = set()


@contextlib.contextmanager
def _store_lock(db: Path) -> Iterator[None]:
    """An exclusive lock on the SQLite store ``db`` (a file beside it), for its creation."""
    with open(db.with_name(db.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def client(uri: str) -> Any:
    """An ``MlflowClient`` of the store at ``uri``. A SQLite store is opened once per process
    under its lock (its folder made, its tables created and migrated by MLflow), so that
    processes starting together never migrate it at the same time."""
    mlflow_settings()
    from mlflow.tracking import MlflowClient

    if not uri.startswith(_SQLITE) or uri in _OPENED:
        return MlflowClient(tracking_uri=uri)
    db = Path(uri[len(_SQLITE) :])
    db.parent.mkdir(parents=True, exist_ok=True)
    with _store_lock(db):
        c = MlflowClient(tracking_uri=uri)  # opening the store makes and migrates its tables
    _OPENED.add(uri)
    return c


def open_store(uri: str) -> None:
    """Create and migrate the store at ``uri`` now (under its lock), before jobs log to it."""
    client(uri)


def _artifact_location(uri: str) -> str | None:
    """``<mlruns>/artifacts`` beside a SQLite store; other stores choose their own."""
    if not uri.startswith(_SQLITE):
        return None
    return (Path(uri[len(_SQLITE) :]).parent / "artifacts").as_uri()


def ensure_experiment(uri: str, name: str) -> str:
    """The id of experiment ``name``, created if it does not exist yet, typed as a
    model-training experiment (an earlier one without a type is given it)."""
    c = client(uri)
    exp = c.get_experiment_by_name(name)
    if exp is None:
        try:
            kind = {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}
            return str(c.create_experiment(name, artifact_location=_artifact_location(uri), tags=kind))
        except Exception:  # created concurrently by another job
            exp = c.get_experiment_by_name(name)
            if exp is None:
                raise
    if EXPERIMENT_KIND_TAG not in exp.tags:
        c.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    return str(exp.experiment_id)


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested config as one level of dotted keys: a mapping's fields as ``<key>.<field>``, a
    list that holds mappings item by item as ``<key>.<index>.<field>`` (``framing.few_shot.0.question``);
    any other value, a list of numbers or names included, under its own key."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list) and any(isinstance(x, Mapping | list) for x in v):
            out.update(flatten({str(i): x for i, x in enumerate(v)}, key + "."))
        else:
            out[key] = v
    return out


def start_run(
    uri: str, experiment: str, run_name: str, tags: Mapping[str, str], start_time: int | None = None
) -> str:
    """Create a RUNNING run in ``experiment`` (started at ``start_time``, ms since the epoch;
    default now) and return its id."""
    exp_id = ensure_experiment(uri, experiment)
    run = client(uri).create_run(exp_id, start_time=start_time, run_name=run_name, tags=dict(tags))
    return str(run.info.run_id)


def supersede(uri: str, experiment: str, new_run_id: str, kind: str, key: str, value: str) -> list[str]:
    """Mark ``new_run_id`` current and every other run of ``kind`` in ``experiment`` whose tag
    ``key`` is ``value`` (the same run or sweep directory) not current, naming the new run.
    Returns the ids newly marked."""
    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    marked: list[str] = []
    token = None
    while exp is not None:
        page = c.search_runs([exp.experiment_id], f"tags.lmaudit.kind = '{kind}'", page_token=token)
        for r in page:
            tags = r.data.tags
            if r.info.run_id != new_run_id and tags.get(key) == value and tags.get(CURRENT_TAG) != "false":
                c.set_tag(r.info.run_id, CURRENT_TAG, "false")
                c.set_tag(r.info.run_id, SUPERSEDED_BY_TAG, new_run_id)
                marked.append(r.info.run_id)
        token = page.token
        if not token:
            break
    c.set_tag(new_run_id, CURRENT_TAG, "true")
    return marked


def start_job(
    *,
    uri: str,
    experiment: str,
    run_name: str,
    parent_run_id: str | None = None,
    run_dir: str | None = None,
    start_time: int | None = None,
    tags: Mapping[str, str] | None = None,
) -> str:
    """Create a job's run (nested under ``parent_run_id``, with ``tags`` beside lmaudit's own)
    and return its id."""
    own = {**(tags or {}), "lmaudit.kind": "job"}
    if run_dir is not None:
        own[RUN_DIR_TAG] = run_dir
    if parent_run_id:
        own["mlflow.parentRunId"] = parent_run_id
    return start_run(uri, experiment, run_name, own, start_time)


def log_run(
    *,
    uri: str,
    run_id: str,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
    artifacts: list[Path],
    end_time: int | None = None,
) -> None:
    """Log into the started run ``run_id``: params (flattened, credentials redacted), finite
    metrics (stamped ``end_time``), tags and artifact files or folders; then mark it FINISHED,
    ended at ``end_time`` (ms since the epoch; default now)."""
    from mlflow.entities import Metric, Param, RunTag

    c = client(uri)
    flat = {
        k: redact_text("" if v is None else str(v))[:6000] for k, v in flatten(redact_config(params)).items()
    }
    now = end_time if end_time is not None else int(time.time() * 1000)
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
    c.set_terminated(run_id, status="FINISHED", end_time=end_time)


def end_run(uri: str, run_id: str, status: str, attempts: int = 3) -> None:
    """Mark a run FAILED (its logging raised after it was started) or KILLED (a signal); a
    store that refuses (a SQLite lock another writer holds) is asked again before giving up."""
    for attempt in range(attempts):
        try:
            client(uri).set_terminated(run_id, status=status)
            return
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(0.5 * (attempt + 1))


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
