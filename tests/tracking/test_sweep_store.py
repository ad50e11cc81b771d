"""A parallel sweep (``hydra/launcher=local_processes``, the documented launcher) on a fresh
MLflow store: the store is created and migrated once, every job is logged, the comparison and
``lmaudit compare`` list every job."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import subprocess
import sys
from pathlib import Path

from lmaudit.console import main as lmaudit_main
from lmaudit.tracking.mlflow_log import client, tracking_uri

REPO = Path(__file__).resolve().parents[2]
TRIES = 3  # the race lost 1 or 2 of 2 jobs on most tries; every try must log both


def _parallel_sweep(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            "hydra/launcher=local_processes",
            "model=sim_projective,sim_repetition",
            "items=sim_demo",
            f"paths.results={root / 'results'}",
            f"paths.cache={root / 'cache'}",
            f"paths.mlruns={root / 'mlruns'}",
            f"hydra.sweep.dir={root / 'sweep'}",
            "progress=false",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _job_runs(db: Path) -> list[tuple[str, str]]:
    """(run name, status) of the store's job runs."""
    con = sqlite3.connect(db)
    try:
        return sorted(
            con.execute(
                "select r.name, r.status from runs r join tags t on t.run_uuid = r.run_uuid "
                "where t.key = 'lmaudit.kind' and t.value = 'job'"
            ).fetchall()
        )
    finally:
        con.close()


def test_a_parallel_sweep_on_a_fresh_store_logs_every_job(tmp_path, capsys) -> None:
    for n in range(TRIES):
        root = tmp_path / f"try{n}"
        proc = _parallel_sweep(root)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "no MLflow run was started" not in proc.stderr, proc.stderr[-3000:]
        names = sorted(
            Path(json.loads(p.read_text())["run_dir"]).name for p in (root / "sweep/jobs").glob("*.json")
        )
        assert len(names) == 2
        assert _job_runs(root / "mlruns" / "mlflow.db") == [(name, "FINISHED") for name in names]
        table = (root / "sweep/comparison.md").read_text()
        assert all(name in table for name in names)
        capsys.readouterr()
        assert lmaudit_main(["compare", "--mlruns", str(root / "mlruns")]) == 0
        listed = capsys.readouterr().out
        assert all(name in listed for name in names), listed


def _open(uri: str) -> None:
    client(uri).search_experiments()


def test_processes_opening_a_fresh_store_together_all_find_it_made(tmp_path) -> None:
    uri = tracking_uri(tmp_path / "mlruns")
    ctx = multiprocessing.get_context("spawn")  # fresh processes, as a sweep's jobs are
    procs = [ctx.Process(target=_open, args=(uri,)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    exp = client(uri).create_experiment("after")  # the store works for every later writer
    assert client(uri).get_experiment(exp).name == "after"


def test_compare_on_a_damaged_store_says_so_in_one_line(tmp_path, capsys) -> None:
    (tmp_path / "mlruns").mkdir()
    (tmp_path / "mlruns" / "mlflow.db").write_bytes(b"this is not an SQLite database" * 100)
    assert lmaudit_main(["compare", "--mlruns", str(tmp_path / "mlruns")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: the MLflow store {tmp_path / 'mlruns'}/mlflow.db cannot be read (")
    assert err.count("\n") == 1, err


def test_a_sweep_whose_jobs_were_not_logged_says_so_at_its_end(tmp_path) -> None:
    (tmp_path / "mlruns").mkdir()
    (tmp_path / "mlruns" / "mlflow.db").write_bytes(b"this is not an SQLite database" * 100)
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            "model=sim_projective,sim_repetition",
            "items=sim_demo",
            f"paths.results={tmp_path / 'results'}",
            f"paths.cache={tmp_path / 'cache'}",
            f"paths.mlruns={tmp_path / 'mlruns'}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            "progress=false",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # results and reports stand
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning: sweep:")]
    dirs = [json.loads(p.read_text())["run_dir"] for p in sorted((tmp_path / "sweep/jobs").glob("*.json"))]
    assert line.startswith("warning: sweep: 2 of 2 jobs are not logged to MLflow")
    assert all(f"lmaudit log {d}" in line for d in dirs), line
