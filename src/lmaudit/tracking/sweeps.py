"""A sweep's MLflow side: one parent run per experiment the sweep touches, its job records,
and the comparison of its jobs logged to each parent.

Each job nests its MLflow run under a parent run *of its own experiment*: the first job of a
study creates the parent (under a file lock, so parallel launcher workers agree) and leaves its
id in ``mlflow_parents.json``. The experiment is known only inside a job: a sweep such as
``-m judge/condition=P0,PA`` selects its study through the swept group.
"""

from __future__ import annotations

import fcntl
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lmaudit.provenance.io import atomic_write_json, atomic_write_text
from lmaudit.provenance.redact import redact_text

SWEEP_FILE = "sweep.json"
PARENTS_FILE = "mlflow_parents.json"
JOBS_DIR = "jobs"


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
    return dict(json.loads(p.read_text())) if p.exists() else {}


def sweep_parent(sweep_dir: str | Path, uri: str, experiment: str) -> str:
    """The sweep's parent run in ``experiment`` of the store at ``uri``, created by the first
    job that asks."""
    from lmaudit.tracking.mlflow_log import start_run

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
        atomic_write_json(sweep_dir / PARENTS_FILE, known)
        return known[experiment]


def job_records(sweep_dir: str | Path) -> list[dict[str, Any]]:
    """The sweep's job records, in job order."""
    folder = Path(sweep_dir) / JOBS_DIR
    recs = [json.loads(p.read_text()) for p in folder.glob("*.json")] if folder.exists() else []
    return sorted(recs, key=lambda r: int(r["num"]))


def log_comparison(uri: str, sweep_dir: Path, records: list[dict[str, Any]]) -> None:
    """Each parent run gets the side-by-side table of its jobs (also written to the sweep
    folder) and is marked FINISHED."""
    from mlflow.entities import Metric

    from lmaudit.tracking.compare import fetch_runs, table, to_csv, to_markdown
    from lmaudit.tracking.mlflow_log import client

    c = client(uri)
    for experiment, run_id in parents(sweep_dir).items():
        runs = fetch_runs(uri, [experiment], parent_run_id=run_id)
        header, rows = table(list(reversed(runs)))
        stem = "comparison" if len(parents(sweep_dir)) == 1 else f"comparison-{experiment}"
        atomic_write_text(sweep_dir / f"{stem}.md", to_markdown(header, rows))
        atomic_write_text(sweep_dir / f"{stem}.csv", to_csv(header, rows))
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
