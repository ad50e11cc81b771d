"""MLflow never decides whether results and report are written, and a run's MLflow record never
stays RUNNING: a signal marks it KILLED, a re-run closes a run an earlier killed process left,
`lmaudit compare` shows each run's status, and a damaged store is reported, not fatal."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from lmaudit.pipeline import run
from lmaudit.tracking.compare import fetch_runs, table
from lmaudit.tracking.mlflow_log import tracking_uri

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "run.py",
            "study=judge",
            "model=sim_judge",
            "progress=false",
            f"out_dir={tmp_path / 'run'}",
            f"paths.cache={tmp_path / 'cache'}",
            f"paths.mlruns={tmp_path / 'mlruns'}",
            *extra,
        ],
        cwd=REPO,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _statuses(db: Path, *, settled: bool = True) -> list[str]:
    """The runs' statuses. While the run's process lives (``settled=False``) the store is read
    read-only, never touching it; once the process is gone it is opened as any later writer (the
    re-run, MLflow) opens it, which rolls back a transaction a SIGKILL left in a hot journal (a
    read-only connection cannot, and fails with "attempt to write a readonly database")."""
    if not db.exists():
        return []
    try:
        uri = f"file:{db}?mode=ro" if not settled else f"file:{db}"
        con = sqlite3.connect(uri, uri=True, timeout=0.05 if not settled else 5.0)
        try:
            return [r[0] for r in con.execute("select status from runs")]
        finally:
            con.close()
    except sqlite3.Error:
        if settled:
            raise
        return []  # the live process holds a lock or is mid-write: look again


def _freeze_while_logging(proc: subprocess.Popen, db: Path) -> bool:
    """Stop ``proc`` (SIGSTOP) as soon as its MLflow run exists; False if it finished first."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if "RUNNING" in _statuses(db, settled=False):
            proc.send_signal(signal.SIGSTOP)
            return "RUNNING" in _statuses(db, settled=False)
        time.sleep(0.002)
    return False


def test_sigterm_during_logging_marks_the_run_killed(tmp_path):
    db = tmp_path / "mlruns" / "mlflow.db"
    for _attempt in range(3):  # the window is the logging: retry if it closed first
        proc = _start(tmp_path)
        caught = _freeze_while_logging(proc, db)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
        if caught:
            break
    assert caught, "the run finished before it could be signalled"
    assert proc.returncode == 143 and "stopped by signal SIGTERM" in err, err[-3000:]
    assert _statuses(db)[-1] == "KILLED" or "KILLED" in _statuses(db), err[-3000:]
    assert "RUNNING" not in _statuses(db)
    assert not (tmp_path / "run" / ".lmaudit.lock").exists()  # the lock went with the run


def test_a_killed_runs_dangling_mlflow_run_is_shown_and_closed_by_the_rerun(tmp_path):
    db = tmp_path / "mlruns" / "mlflow.db"
    for _attempt in range(3):
        proc = _start(tmp_path)
        caught = _freeze_while_logging(proc, db)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        if caught:
            break
    assert caught, "the run finished before it could be killed"
    assert _statuses(db) == ["RUNNING"]
    header, rows = table(fetch_runs(tracking_uri(tmp_path / "mlruns")))
    assert rows[0][header.index("status")] == "RUNNING"  # compare never lists it as finished
    again = _start(tmp_path)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-2000:]
    assert "of an earlier, interrupted run" in out and "marked KILLED" in out
    assert sorted(_statuses(db)) == ["FINISHED", "KILLED"]
    header, rows = table(fetch_runs(tracking_uri(tmp_path / "mlruns")))
    assert [r[header.index("status")] for r in rows] == ["FINISHED", "KILLED"]


def test_a_damaged_store_is_reported_and_results_and_report_are_written(make_cfg, tmp_path, capsys):
    (tmp_path / "mlruns").mkdir()
    (tmp_path / "mlruns" / "mlflow.db").write_bytes(b"this is not an SQLite database" * 100)
    run(make_cfg("model=sim_projective", "items=sim_demo", name="d"))
    out = tmp_path / "d"
    assert (out / "results.json").exists() and (out / "report.html").exists()
    audit = json.loads((out / "audit_record.json").read_text())
    assert audit["mlflow"]["run_id"] is None
    assert audit["mlflow"]["not_logged"].startswith("no MLflow run was started in sqlite:///")
    assert audit["mlflow"]["log_later"] == f"lmaudit log {out}"
    err = capsys.readouterr().err
    assert "warning: no MLflow run was started" in err and "results.json and report.html are written" in err
    assert err.rstrip().endswith(f"to log the run later: lmaudit log {out}")
    assert len(err.strip().splitlines()) == 1  # one line, no traceback
