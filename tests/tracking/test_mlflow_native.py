"""MLflow used as MLflow: experiments typed as model-training experiments, a run's source,
command line, description and its own start and end (also when logged later), metric keys that
line up across models, the earlier runs of a run folder marked superseded, and `lmaudit
compare` as one table per study with a legend and the model that was measured. Real SQLite
stores under tmp_path, no mocks."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lmaudit.console import main as lmaudit_main
from lmaudit.pipeline import run
from lmaudit.tracking.mlflow_log import tracking_uri

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
QQ = ("model=sim_projective", "items=sim_demo")
DRAWS = (
    "study=draws",
    "model=sim_persistent",
    "study.permutations=199",
    "study.sims_per_step=20",
    f"study.probes_path={REPO / 'data/draws/probes.jsonl'}",
    "study.probe_ids=[color]",
    "study.n=10",
    "study.replicates=3",
)


def epoch_ms(stamp: str) -> int:
    """A recorded UTC stamp (``...Z``) in ms since the epoch."""
    t = datetime.datetime.fromisoformat(stamp.removesuffix("Z")).replace(tzinfo=datetime.UTC)
    return round(t.timestamp() * 1000)


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _runs(uri: str) -> list[Any]:
    c = _client(uri)
    exps = [e.experiment_id for e in c.search_experiments()]
    return list(c.search_runs(exps, order_by=["attributes.start_time ASC"])) if exps else []


def test_experiments_are_model_training_experiments_new_and_existing(make_cfg, tmp_path):
    uri = tracking_uri(tmp_path / "mlruns")
    (tmp_path / "mlruns").mkdir()
    old = _client(uri).create_experiment("lmaudit-judge")  # made by an earlier version: no type
    assert "mlflow.experimentKind" not in _client(uri).get_experiment(old).tags
    run(make_cfg(*QQ, name="qq"))
    run(make_cfg("study=judge", "model=sim_judge", name="judge"))
    for name in ("lmaudit-qq", "lmaudit-judge"):
        exp = _client(uri).get_experiment_by_name(name)
        assert exp.tags["mlflow.experimentKind"] == "custom_model_development", name


def test_a_run_records_its_source_command_description_and_own_start_and_end(tmp_path):
    out, mlruns = tmp_path / "run", tmp_path / "mlruns"
    args = ["run.py", *QQ, "progress=false", f"out_dir={out}", f"paths.cache={tmp_path / 'cache'}"]
    proc = subprocess.run(
        [sys.executable, *args, f"paths.mlruns={mlruns}"],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (logged,) = _runs(tracking_uri(mlruns))
    tags = logged.data.tags
    assert tags["mlflow.source.name"] == str(REPO / "run.py") and tags["mlflow.source.type"] == "LOCAL"
    assert "run.py model=sim_projective items=sim_demo" in tags["command"]
    summary = next(line for line in proc.stdout.splitlines() if line.startswith("QQ: "))
    assert tags["mlflow.note.content"] == summary  # the one-line summary is the run's description
    # the run's own start and end, as its audit record holds them; the logging came after
    audit = json.loads((out / "audit_record.json").read_text())
    report = audit["report"]
    start, end = epoch_ms(report["run_started_utc"]), epoch_ms(report["run_ended_utc"])
    assert (logged.info.start_time, logged.info.end_time) == (start, end)
    assert start <= epoch_ms(audit["plan"]["written_utc"]) + 999 and start < end
    assert end < epoch_ms(audit["mlflow"]["logged_utc"]) + 1000
    assert set(logged.data.metrics) and all(
        m.timestamp == end
        for k in logged.data.metrics
        for m in _client(tracking_uri(mlruns)).get_metric_history(logged.info.run_id, k)
    )

    time.sleep(1.1)  # logged again later: the run keeps its own times, not the logging's
    other = tracking_uri(tmp_path / "other")
    assert lmaudit_main(["log", str(out), "--tracking-uri", other]) == 0
    (later,) = _runs(other)
    assert (later.info.start_time, later.info.end_time) == (start, end)
    assert later.data.tags["command"] == tags["command"]
    assert later.data.tags["mlflow.note.content"] == summary


def test_metric_keys_are_the_same_across_models_and_the_model_is_a_tag(make_cfg, tmp_path):
    run(make_cfg(*DRAWS, name="a"))
    run(make_cfg(*DRAWS, "model.name=other-model", "model.params.answers=[a,b,c,d]", name="b"))
    a, b = sorted(_runs(tracking_uri(tmp_path / "mlruns")), key=lambda r: r.data.tags["run_dir"])
    assert set(a.data.metrics) == set(b.data.metrics)
    assert {"T", "holm_p", "rho_hat", "drift_p", "share_rejected"} <= set(a.data.metrics)
    assert (a.data.tags["model"], b.data.tags["model"]) == ("sim-persistent", "other-model")
    assert a.data.tags["family"] == "sim-persistent" and "family.sim-persistent" not in a.data.tags
    # the DVC view holds a few of MLflow's metrics, under the same names
    dvc_view = json.loads((tmp_path / "b" / "metrics.json").read_text())
    # (max_rho_upper is censored here: "rho_upper > 0.50" is no number, so neither holds it)
    assert (
        set(dvc_view) == {"n_sequences", "n_rejected", "min_holm_p"} and "max_rho_upper" not in b.data.metrics
    )
    assert dvc_view.items() <= b.data.metrics.items()


def test_a_rerun_of_a_run_folder_supersedes_its_earlier_run(make_cfg, tmp_path, capsys):
    run(make_cfg(*QQ, name="same"))
    run(make_cfg(*QQ, "overwrite=true", "estimand.n=100", name="same"))
    assert "is superseded by run" in capsys.readouterr().out
    first, second = _runs(tracking_uri(tmp_path / "mlruns"))
    assert first.info.run_name == second.info.run_name
    assert first.data.tags["lmaudit.current"] == "false"
    assert first.data.tags["lmaudit.superseded_by"] == second.info.run_id
    assert second.data.tags["lmaudit.current"] == "true" and "lmaudit.superseded_by" not in second.data.tags
    run(make_cfg(*QQ, name="elsewhere"))  # another run folder leaves both as they are
    tags = {r.info.run_id: r.data.tags["lmaudit.current"] for r in _runs(tracking_uri(tmp_path / "mlruns"))}
    assert sorted(tags.values()) == ["false", "true", "true"] and tags[second.info.run_id] == "true"


def test_compare_shows_one_table_per_study_with_a_legend_and_the_measured_model(make_cfg, tmp_path, capsys):
    choir = (
        "study=choir",
        "ensemble=sim",
        "study.question_ids=[H001,H002]",
        "study.templates=[A]",
        "study.personas=[archivist]",
        "study.generations=2",
        "study.embedder.kind=sim",
        "study.shuffles=50",
    )
    run(make_cfg(*choir, name="choir"))
    run(make_cfg(*QQ, name="qq"))
    capsys.readouterr()
    md, csv_path = tmp_path / "cmp.md", tmp_path / "cmp.csv"
    argv = ["compare", "--mlruns", str(tmp_path / "mlruns"), "--markdown", str(md), "--csv", str(csv_path)]
    assert lmaudit_main(argv) == 0
    text = capsys.readouterr().out
    for doc in (text, md.read_text()):
        assert doc.index("qq") < doc.index("choir")  # newest first, one table per study
        assert "model: the model(s) measured" in doc.replace("**", "")
        assert "SAT: items whose QQ equality holds" in doc.replace("**", "")
        assert "members: ensemble members" in doc.replace("**", "")
    sections = md.read_text().split("### ")[1:]
    assert [s.split("\n", 1)[0] for s in sections] == ["qq", "choir"]
    header, _, row = (ln for ln in sections[1].splitlines() if ln.startswith("|"))
    model = [c.strip() for c in row.split("|")][header.split("|").index(" model ")]
    assert model == "sim-1,sim-2,sim-3,sim-4"  # the members that answered, not the config's run model
    rows = csv_path.read_text().splitlines()
    assert rows[0].startswith("run,status,study,") and len(rows) == 3
