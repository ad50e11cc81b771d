"""Credentials in a server URL reach no file lmaudit writes: plan, measurements, results, audit
record, report, MLflow params/tags/artifacts, sweep records; the plan digest ignores them."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from lmaudit.pipeline import run
from stub_server import stub_model_args

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}


def _with_password(url: str, password: str) -> str:
    return url.replace("http://", f"http://user:{password}@", 1)


def _db_rows_holding(db: Path, needle: str) -> list[str]:
    con = sqlite3.connect(db)
    found = []
    for (table,) in con.execute("select name from sqlite_master where type = 'table'"):
        for row in con.execute(f"select * from {table}"):
            if any(needle in (v.decode("latin-1") if isinstance(v, bytes) else str(v)) for v in row):
                found.append(f"{table}: {row}")
    con.close()
    return found


def _leaks(root: Path, needle: bytes) -> list[str]:
    """Files under ``root`` holding ``needle``. MLflow's SQLite schema itself names ``secrets``
    tables, so ``mlflow.db`` counts when a row holds the needle or its bytes hold it as a URL's
    userinfo."""
    out = []
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        data = p.read_bytes()
        if p.name == "mlflow.db":
            if b"user:" + needle in data or _db_rows_holding(p, needle.decode()):
                out.append(str(p))
        elif needle in data:
            out.append(str(p))
    return out


def test_plan_stage_records_no_password_and_digest_ignores_it(make_cfg, tmp_path):
    plans = []
    for i, pw in enumerate(("secret", "other-secret")):
        url = f"http://user:{pw}@127.0.0.1:9/v1?api_key={pw}"
        run(make_cfg("model=openai", f"model.base_url='{url}'", "model.model=m", "stage=plan", name=f"p{i}"))
        assert not _leaks(tmp_path / f"p{i}", b"secret")
        plans.append(json.loads((tmp_path / f"p{i}" / "plan.json").read_text()))
    assert plans[0]["plan_digest"] == plans[1]["plan_digest"]
    assert plans[0]["config"]["model"]["base_url"] == "http://***@127.0.0.1:9/v1?api_key=***"


def test_full_run_against_a_server_leaves_no_password_anywhere(openai_stub, tmp_path):
    _, url = openai_stub
    args = [a if not a.startswith("model.base_url=") else f"model.base_url={_with_password(url, 'secret')}"
            for a in stub_model_args(url)]  # fmt: skip
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            *args,
            "items=sim_demo",
            "study.gates.g3.enabled=false",
            "progress=false",
            f"out_dir={tmp_path / 'run'}",
            f"paths.cache={tmp_path / 'cache'}",
            f"paths.mlruns={tmp_path / 'mlruns'}",
        ],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "run" / "report.html").exists() and (tmp_path / "mlruns" / "mlflow.db").exists()
    for root in ("run", "mlruns", "cache"):
        assert not _leaks(tmp_path / root, b"secret"), root
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["config"]["model"]["base_url"].startswith("http://***@127.0.0.1:")


def test_sweep_records_carry_no_password(openai_stub, tmp_path):
    _, url = openai_stub
    args = [a if not a.startswith("model.base_url=") else f"model.base_url={_with_password(url, 'secret')}"
            for a in stub_model_args(url)]  # fmt: skip
    sweep = tmp_path / "sweep"
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            *args,
            "run_name=ja,jb",
            "items=sim_demo",
            "study.gates.g3.enabled=false",
            "progress=false",
            f"hydra.sweep.dir={sweep}",
            f"paths.results={tmp_path / 'results'}",
            f"paths.cache={tmp_path / 'cache'}",
            f"paths.mlruns={tmp_path / 'mlruns'}",
        ],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list((sweep / "jobs").glob("*.json"))) == 2
    for root in ("sweep", "results", "mlruns"):
        assert not _leaks(tmp_path / root, b"secret"), root
