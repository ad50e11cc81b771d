"""A sweep's MLflow side: one parent run per experiment the sweep touches, its job records,
and the comparison of its jobs logged to each parent.

Each job nests its MLflow run under a parent run *of its own experiment*: the first job of a
study creates the parent (under a file lock, so parallel launcher workers agree) and leaves its
id in ``mlflow_parents.json``. The experiment is known only inside a job: a sweep such as
``-m judge/condition=P0,PA`` selects its study through the swept group.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.provenance.io import atomic_write_json, atomic_write_text
from lmaudit.provenance.redact import redact_text

SWEEP_FILE = "sweep.json"
PARENTS_FILE = "mlflow_parents.json"
JOBS_DIR = "jobs"
#: the fields of a job record (pipeline.sweep writes ``jobs/<num, 4 digits>.json``)
RECORD_FIELDS = frozenset(
    {"num", "overrides", "study", "experiment", "run_dir", "status", "error", "config", "ended_utc"}
)
_RECORD_NAME = re.compile(r"(\d{4,})\.json")
_RUN_ID = re.compile(r"[0-9a-f]{32}")


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def own_record(path: Path) -> dict[str, Any] | None:
    """The job record at ``path`` when lmaudit can prove it wrote it (named by its job number,
    an object with exactly a record's fields), else None: the file is someone else's."""
    m = _RECORD_NAME.fullmatch(path.name)
    if m is None or not path.is_file():
        return None
    doc = _json_file(path)
    if isinstance(doc, dict) and set(doc) == RECORD_FIELDS and doc["num"] == int(m.group(1)):
        return doc
    return None


def _own_parents(path: Path) -> bool:
    doc = _json_file(path)
    return isinstance(doc, dict) and all(
        isinstance(k, str) and isinstance(v, str) and _RUN_ID.fullmatch(v) for k, v in doc.items()
    )


def clear_records(sweep_dir: Path) -> None:
    """Before a sweep: remove an earlier sweep's records from ``sweep_dir`` (a fixed
    ``hydra.sweep.dir``), only those lmaudit can prove it wrote. Anything else stays: files in
    ``jobs/`` that are not job records, and a ``mlflow_parents.json`` that is not lmaudit's
    (which :func:`parents` then refuses to read or replace)."""
    parents_file = sweep_dir / PARENTS_FILE
    if parents_file.exists() and _own_parents(parents_file):
        parents_file.unlink()
    folder = sweep_dir / JOBS_DIR
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        if own_record(path) is not None:
            path.unlink()
    with contextlib.suppress(OSError):  # only when nothing else is left in it
        folder.rmdir()


@contextmanager
def _locked(sweep_dir: Path) -> Iterator[None]:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def parents(sweep_dir: str | Path) -> dict[str, str]:
    """``{experiment: parent run id}`` of a sweep (empty before its first job logged)."""
    p = Path(sweep_dir) / PARENTS_FILE
    if not p.exists():
        return {}
    if not _own_parents(p):
        raise InputError(
            f"{p}: not a record of lmaudit's (a sweep's file of MLflow parent runs), and this sweep "
            "would replace it; move it, or choose another hydra.sweep.dir"
        )
    return dict(json.loads(p.read_text()))


def sweep_parent(sweep_dir: str | Path, uri: str, experiment: str) -> str:
    """The sweep's parent run in ``experiment`` of the store at ``uri``, created by the first
    job that asks."""
    from lmaudit.tracking.mlflow_log import start_run, supersede

    sweep_dir = Path(sweep_dir)
    with _locked(sweep_dir):
        known = parents(sweep_dir)
        if experiment in known:
            return known[experiment]
        meta = json.loads((sweep_dir / SWEEP_FILE).read_text()) if (sweep_dir / SWEEP_FILE).exists() else {}
        known[experiment] = start_run(
            uri,
            experiment,
            f"sweep {sweep_dir.name}",
            {
                "lmaudit.kind": "sweep",
                "sweep_dir": str(sweep_dir),
                "sweep_overrides": redact_text(" ".join(meta.get("overrides", [])))[:5000],
            },
        )
        # the sweep run again in the same folder: its earlier parent runs are not current
        supersede(uri, experiment, known[experiment], "sweep", "sweep_dir", str(sweep_dir))
        atomic_write_json(sweep_dir / PARENTS_FILE, known)
        return known[experiment]


def job_records(sweep_dir: str | Path) -> list[dict[str, Any]]:
    """The sweep's job records, in job order."""
    folder = Path(sweep_dir) / JOBS_DIR
    recs = [own_record(p) for p in sorted(folder.glob("*.json"))] if folder.exists() else []
    return sorted((r for r in recs if r is not None), key=lambda r: int(r["num"]))


def log_comparison(uri: str, sweep_dir: Path, records: list[dict[str, Any]]) -> None:
    """Each parent run gets the side-by-side table of its jobs (also written to the sweep
    folder) and is marked FINISHED."""
    from mlflow.entities import Metric

    from lmaudit.tracking.compare import fetch_runs, table, tables, to_csv, to_markdown
    from lmaudit.tracking.mlflow_log import client

    c = client(uri)
    for experiment, run_id in parents(sweep_dir).items():
        runs = fetch_runs(uri, [experiment], parent_run_id=run_id)
        in_order = list(reversed(runs))
        stem = "comparison" if len(parents(sweep_dir)) == 1 else f"comparison-{experiment}"
        atomic_write_text(sweep_dir / f"{stem}.md", to_markdown(tables(in_order)))
        atomic_write_text(sweep_dir / f"{stem}.csv", to_csv(*table(in_order)))
        now = int(time.time() * 1000)
        n_jobs = sum(r["experiment"] == experiment for r in records)
        c.log_batch(run_id, metrics=[Metric("n_jobs", n_jobs, now, 0), Metric("n_runs", len(runs), now, 0)])
        c.log_artifact(run_id, str(sweep_dir / f"{stem}.md"))
        c.log_artifact(run_id, str(sweep_dir / f"{stem}.csv"))
        c.set_terminated(run_id, status="FINISHED")
        print(
            f"sweep: {len(runs)} runs under MLflow parent run {run_id} ({experiment}); "
            f"comparison in {sweep_dir}/{stem}.md"
        )
