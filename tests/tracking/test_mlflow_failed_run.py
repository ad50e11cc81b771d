"""A job whose report fails after its MLflow run was started leaves the run FAILED, not RUNNING."""

from __future__ import annotations

import sqlite3

import pytest

from lmaudit.pipeline import run


def test_a_failure_after_the_run_started_marks_it_failed(make_cfg, tmp_path, monkeypatch):
    import lmaudit.studies.qq.study as qq

    def broken(*a, **k):  # type: ignore[no-untyped-def]
        raise RuntimeError("report template exploded")

    monkeypatch.setattr(qq.QQStudy, "report", broken)
    with pytest.raises(RuntimeError, match="exploded"):
        run(make_cfg("model=sim_projective", "mlflow.enabled=true", name="broken"))
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    statuses = [s for (s,) in con.execute("select status from runs")]
    con.close()
    assert statuses == ["FAILED"]
