"""Families that are paths (lm-eval names a model by its ``pretrained=`` path), or hold ``//``
or ``..``, get MLflow keys MLflow takes: the run is logged FINISHED into a real SQLite store,
``lmaudit compare`` shows its numbers, ``lmaudit log --again`` logs it again."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from lmaudit.console import main as lmaudit_main
from lmaudit.pipeline import run
from lmaudit.studies.draws.analysis import metric_key
from lmaudit.tracking.compare import fetch_runs, table
from lmaudit.tracking.mlflow_log import client, tracking_uri

REPO = Path(__file__).resolve().parents[3]
RENAMED = {"model-a": "/data/models/llama-3-8b", "model-b": "runs//b/../c"}
HOSTILE = [
    "/data/models/llama-3-8b",
    "pretrained=/data/models/llama-3-8b",
    "a//b",
    "a/../b",
    "a/./b",
    "..x",
    ".hidden",
    "x/",
    "/",
    "...",
    "a" * 300,
    "org/model",
    "gpt-oss:120b",
]


def test_keys_of_path_like_families_are_taken_by_mlflow_and_distinct(tmp_path) -> None:
    from mlflow.entities import Metric, RunTag

    keys = {name: metric_key(name) for name in HOSTILE}
    assert len(set(keys.values())) == len(HOSTILE)  # one key per name
    assert keys["org/model"] == "org/model" and keys["gpt-oss:120b"] == "gpt-oss_120b"  # kept as before
    assert keys["/data/models/llama-3-8b"].startswith("data/models/llama-3-8b-")
    assert metric_key("a//b") == keys["a//b"]  # stable
    c = client(tracking_uri(tmp_path / "mlruns"))
    run_id = c.create_run(c.create_experiment("keys")).info.run_id
    # MLflow's own validation of every key (it refused '/data/...', 'a//b', 'a/../b' before)
    c.log_batch(
        run_id,
        metrics=[Metric(f"{k}.T", 1.0, 0, 0) for k in keys.values()],
        tags=[RunTag(f"family.{k}", "v") for k in keys.values()],
    )
    assert set(c.get_run(run_id).data.metrics) == {f"{k}.T" for k in keys.values()}


def test_a_draws_import_of_path_named_families_is_logged_and_logged_again(make_cfg, tmp_path) -> None:
    rows = [json.loads(line) for line in (REPO / "data/draws/example_import.jsonl").read_text().splitlines()]
    data = tmp_path / "import.jsonl"
    data.write_text("".join(json.dumps({**r, "family": RENAMED[r["family"]]}) + "\n" for r in rows))
    cfg = make_cfg(
        "study=draws",
        f"study.import_path={data}",
        "study.permutations=999",
        "study.sims_per_step=100",
        "mlflow.enabled=true",
        name="paths",
    )
    run(cfg)
    out = Path(cfg.out_dir)
    audit = json.loads((out / "audit_record.json").read_text())["mlflow"]
    assert audit["run_id"] and "not_logged" not in audit

    db = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    assert [s for (s,) in db.execute("select status from runs")] == ["FINISHED"]
    metrics = dict(db.execute("select key, value from latest_metrics"))
    tags = dict(db.execute("select key, value from tags"))
    db.close()
    for name in RENAMED.values():
        key = metric_key(name)
        assert key != name and f"{key}.T" in metrics and f"{key}.holm_p" in metrics
        assert tags[f"family_name.{key}"] == name and f"family.{key}" in tags

    header, table_rows = table(fetch_runs(tracking_uri(tmp_path / "mlruns")))
    (row,) = table_rows
    assert row[header.index("status")] == "FINISHED"
    assert any(cell not in ("", "FINISHED") and cell.replace(".", "").isdigit() for cell in row)

    assert lmaudit_main(["log", str(out), "--again"]) == 0
    db = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    assert sorted(s for (s,) in db.execute("select status from runs")) == ["FINISHED", "FINISHED"]
    db.close()
