"""A job whose logging fails after its MLflow run was created leaves that run FAILED, never
RUNNING; results and report stand, and the run directory can be logged later."""

from __future__ import annotations

import json
import sqlite3

from lmaudit.console import main as lmaudit_main
from lmaudit.pipeline import run


def _statuses(db) -> list[str]:  # type: ignore[no-untyped-def]
    con = sqlite3.connect(db)
    try:
        return [s for (s,) in con.execute("select status from runs order by start_time")]
    finally:
        con.close()


def test_a_failure_after_the_run_was_created_marks_it_failed(make_cfg, tmp_path, capsys):
    mlruns = tmp_path / "mlruns"
    mlruns.mkdir()
    (mlruns / "artifacts").write_text("a file where the artifact folder should be\n")
    run(make_cfg("model=sim_projective", "items=sim_demo", name="broken"))
    out = tmp_path / "broken"
    assert (out / "results.json").exists() and (out / "report.html").exists()
    assert _statuses(mlruns / "mlflow.db") == ["FAILED"]
    audit = json.loads((out / "audit_record.json").read_text())["mlflow"]
    assert audit["not_logged"].startswith(f"MLflow run {audit['run_id']} is marked FAILED")
    err = capsys.readouterr().err
    assert "is marked FAILED" in err and f"lmaudit log {out}" in err

    (mlruns / "artifacts").unlink()
    assert lmaudit_main(["log", str(out)]) == 0  # a FAILED run is not "already logged"
    assert _statuses(mlruns / "mlflow.db") == ["FAILED", "FINISHED"]
