"""The README's main job, for real: the default QQ audit of the embedded Gemma 3 270M."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_default_audit_on_embedded_model(tmp_path):
    out = tmp_path / "run"
    common = [f"paths.cache={tmp_path / 'cache'}", f"paths.mlruns={tmp_path / 'mlruns'}", "progress=false"]
    proc = subprocess.run(
        [sys.executable, "run.py", f"out_dir={out}", *common],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("plan.json", "measurements.jsonl", "results.json", "audit_record.json", "report.html"):
        assert (out / name).stat().st_size > 0, name

    res = json.loads((out / "results.json").read_text())
    assert res["n_items"] == 18
    assert sum(res["counts"]["verdict"].values()) == 18
    assert {g: v["status"] for g, v in res["gates"].items()}["G1"] == "PASS"  # A/B, Yes/No are single tokens
    for g in ("G2", "G3"):
        assert res["gates"][g]["status"] in {"PASS", "FAIL"}
    # every position's raw label mass and other mass are recorded and add up
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    pos = [r for r in rows if r["kind"] == "position"]
    assert len(pos) == 186
    for r in pos:
        assert abs(sum(r["probs"].values()) + r["other"] - 1) < 1e-5
        assert r["top_k"] and r["top_k"][0][1] >= r["top_k"][-1][1]

    audit = json.loads((out / "audit_record.json").read_text())
    ident = audit["measure"]["backend_identity"]
    assert ident["backend"] == "hf" and ident["chat_template_sha256"]
    assert audit["mlflow"]["run_id"]
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    (status,) = con.execute(
        "select status from runs where run_uuid=?", (audit["mlflow"]["run_id"],)
    ).fetchone()
    assert status == "FINISHED"

    # re-analysis without the model reproduces results.json exactly
    again = tmp_path / "again"
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            "stage=analyze",
            f"measurements={out / 'measurements.jsonl'}",
            f"out_dir={again}",
            "mlflow.enabled=false",
            *common,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (again / "results.json").read_bytes() == (out / "results.json").read_bytes()
