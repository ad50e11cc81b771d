"""MLflow in the run's own process, once results.json and report.html are written: the run logs
its params, metrics, gate tags, predictions beside their outcomes, and its files; a store that
is locked or cannot be reached leaves results and report as they are (exit 0, one warning line
saying how to log later); ``lmaudit log <run dir>`` logs a finished run later, with the same
params and metrics. Real SQLite stores under tmp_path throughout, no mocks."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from lmaudit.console import main as lmaudit_main
from lmaudit.pipeline import run
from lmaudit.prereg import prediction_metrics
from lmaudit.provenance.digest import file_sha256
from lmaudit.studies.qq.study import QQStudy
from lmaudit.tracking.mlflow_log import flatten, tracking_uri

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}


def _runs(uri: str) -> list[Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exps = [e.experiment_id for e in client.search_experiments()]
    return list(client.search_runs(exps, order_by=["attributes.start_time ASC"])) if exps else []


def _artifact(uri: str, run_id: str, name: str, dst: Path) -> bytes:
    from mlflow.tracking import MlflowClient

    return Path(MlflowClient(tracking_uri=uri).download_artifacts(run_id, name, str(dst))).read_bytes()


def _own_tags(run: Any) -> dict[str, str]:
    return {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")}


def _run_py(tmp_path: Path, mlruns: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable,
        "run.py",
        "model=sim_projective",
        "items=sim_demo",
        "progress=false",
        f"out_dir={tmp_path / name}",
        f"paths.cache={tmp_path / 'cache'}",
        f"paths.mlruns={mlruns}",
        *extra,
    ]
    return subprocess.run(args, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)


def _warning(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    warnings = [ln for ln in lines if ln.startswith("warning:")]
    assert len(warnings) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return warnings[0]


def test_a_run_logs_in_process_and_lmaudit_log_logs_the_same_run_later(make_cfg, tmp_path, capsys):
    def cfg(*extra: str) -> Any:
        reg = ("prereg=qq_sim_mixture", f"paths.prereg={tmp_path / 'prereg'}")
        return make_cfg(*reg, *extra, name="reg")

    run(cfg("stage=freeze"))
    run(cfg())
    out, uri = tmp_path / "reg", tracking_uri(tmp_path / "mlruns")
    results = json.loads((out / "results.json").read_text())
    audit = json.loads((out / "audit_record.json").read_text())
    (logged,) = _runs(uri)
    assert logged.info.status == "FINISHED" and audit["mlflow"]["run_id"] == logged.info.run_id
    assert "not_logged" not in audit["mlflow"]
    # params are the plan's config as it applies to the design; metrics are the study's metrics of
    # results.json and each prediction's observed value; metrics.json (the DVC view, written apart)
    # holds a few of them under the same names, and the predictions scored and held
    plan = json.loads((out / "plan.json").read_text())
    params = QQStudy().tracked_params(plan["config"])
    assert logged.data.params == {k: "" if v is None else str(v) for k, v in flatten(params).items()}
    result = QQStudy().result(results)
    assert logged.data.metrics == {**result.metrics, **prediction_metrics(result)}
    dvc_view = json.loads((out / "metrics.json").read_text())
    assert dvc_view == {
        **{k: result.metrics[k] for k in QQStudy.dvc_metrics},
        "predictions": len(results["predictions"]),
        "held": sum(p["outcome"] == "held" for p in results["predictions"]),
    }
    tags = logged.data.tags
    assert {f"gate.{g}": r["status"] for g, r in results["gates"].items()}.items() <= tags.items()
    assert {f"prediction.{p['id']}": p["outcome"] for p in results["predictions"]}.items() <= tags.items()
    assert tags["plan_digest"] == plan["plan_digest"] and tags["lmaudit.run_dir"] == str(out.resolve())
    # the files are logged as written, the audit record naming its run
    got = tmp_path / "got"
    for name in ("report.html", "results.json", "plan.json"):
        assert _artifact(uri, logged.info.run_id, name, got) == (out / name).read_bytes(), name
    logged_audit = json.loads(_artifact(uri, logged.info.run_id, "audit_record.json", got))
    assert logged_audit["mlflow"]["run_id"] == logged.info.run_id
    assert _artifact(uri, logged.info.run_id, "qq_sim_mixture.json", got)  # the registration
    capsys.readouterr()

    # logged again later, from the run directory alone, into another store
    other = tracking_uri(tmp_path / "other")
    assert lmaudit_main(["log", str(out), "--tracking-uri", other]) == 0
    assert f"({other})" in capsys.readouterr().out
    (later,) = _runs(other)
    assert later.info.status == "FINISHED" and later.info.run_name == logged.info.run_name
    assert later.data.params == logged.data.params
    assert later.data.metrics == logged.data.metrics
    assert _own_tags(later) == _own_tags(logged)
    assert json.loads((out / "audit_record.json").read_text())["mlflow"]["run_id"] == later.info.run_id

    # a store the run is already logged to is not given it twice, unless asked
    assert lmaudit_main(["log", str(out), "--tracking-uri", other]) == 2
    assert "already logged as MLflow run" in capsys.readouterr().err
    assert lmaudit_main(["log", str(out), "--tracking-uri", other, "--again"]) == 0
    assert len(_runs(other)) == 2


def test_a_locked_store_leaves_results_and_report_and_the_run_logs_later(tmp_path):
    reference = _run_py(tmp_path, tmp_path / "unused", "reference", "mlflow.enabled=false")
    assert reference.returncode == 0, reference.stderr[-3000:]
    mlruns = tmp_path / "mlruns"
    uri = tracking_uri(mlruns)
    assert _runs(uri) == []  # the store exists, with MLflow's tables
    holder = sqlite3.connect(mlruns / "mlflow.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the store (a long write, a stuck UI)
    try:
        proc = _run_py(tmp_path, mlruns, "run")
    finally:
        holder.rollback()
        holder.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "run"
    line = _warning(proc.stderr)
    assert "no MLflow run was started" in line and "locked" in line
    assert line.endswith(f"to log the run later: lmaudit log {out}")
    # results and report are the run's own, untouched by the failed logging
    assert (out / "results.json").read_bytes() == (tmp_path / "reference" / "results.json").read_bytes()
    audit = json.loads((out / "audit_record.json").read_text())
    assert audit["report"]["report_sha256"] == file_sha256(out / "report.html")
    assert audit["analyze"]["results_sha256"] == file_sha256(out / "results.json")
    assert audit["mlflow"]["run_id"] is None and audit["mlflow"]["log_later"] == f"lmaudit log {out}"
    assert _runs(uri) == []

    assert lmaudit_main(["log", str(out)]) == 0  # the store named in the audit record
    (logged,) = _runs(uri)
    assert logged.info.status == "FINISHED" and logged.data.tags["gate.G1"] == "PASS"
    audit = json.loads((out / "audit_record.json").read_text())
    assert audit["mlflow"]["run_id"] == logged.info.run_id and "not_logged" not in audit["mlflow"]


def test_a_store_that_cannot_be_reached_is_reported_and_the_run_goes_on(make_cfg, tmp_path, capsys):
    (tmp_path / "a-file").write_text("not a folder\n")
    unreachable = tmp_path / "a-file" / "mlruns"
    headline = run(
        make_cfg("model=sim_projective", "items=sim_demo", f"paths.mlruns={unreachable}", name="d")
    )
    assert headline is not None
    out = tmp_path / "d"
    assert (out / "results.json").exists() and (out / "report.html").exists()
    audit = json.loads((out / "audit_record.json").read_text())
    assert audit["mlflow"]["not_logged"].startswith(
        f"no MLflow run was started in {tracking_uri(unreachable)}"
    )
    line = _warning(capsys.readouterr().err)
    assert "results.json and report.html are written" in line and f"lmaudit log {out}" in line

    assert lmaudit_main(["log", str(out)]) == 1  # still unreachable: said again, nothing raised
    assert "no MLflow run was started" in _warning(capsys.readouterr().err)
    elsewhere = tracking_uri(tmp_path / "mlruns")
    assert lmaudit_main(["log", str(out), "--tracking-uri", elsewhere]) == 0
    assert [r.info.status for r in _runs(elsewhere)] == ["FINISHED"]


def test_a_run_with_tracking_off_can_be_logged_later_and_an_unfinished_dir_is_refused(
    make_cfg, tmp_path, capsys
):
    cfg = make_cfg(
        "model=sim_projective", "items=sim_demo", "mlflow.enabled=false", "run_name=quiet", name="off"
    )
    run(cfg)
    out = tmp_path / "off"
    assert not (tmp_path / "mlruns").exists()  # MLflow was never asked
    assert (
        json.loads((out / "audit_record.json").read_text())["mlflow"]["not_logged"] == "mlflow.enabled=false"
    )
    assert lmaudit_main(["log", str(out)]) == 0
    (logged,) = _runs(tracking_uri(tmp_path / "mlruns"))
    assert logged.info.status == "FINISHED" and logged.info.run_name == "quiet"
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    assert lmaudit_main(["log", str(tmp_path / "empty")]) == 2
    assert "no results.json; not a finished run directory" in capsys.readouterr().err
