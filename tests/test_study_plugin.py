"""A study from another installed package runs through run.py with nothing edited in lmaudit:
``tests/plugins`` holds the package ``tinystudy`` and its distribution metadata, whose entry
point (group ``lmaudit.studies``) is the only registration."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cli_runs import run_cli, scratch_paths
from lmaudit.errors import InputError
from lmaudit.studies.registry import get_study

REPO = Path(__file__).resolve().parents[1]
PLUGINS = REPO / "tests" / "plugins"


def _run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")])}
    return run_cli(
        *overrides,
        *scratch_paths(tmp_path),
        "progress=false",
        env=env,
    )


def test_a_study_from_another_package_runs_through_run_py(tmp_path):
    proc = _run(tmp_path, "study=tiny", "model=sim_persistent", "study.n=15")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "results" / "tiny" / "sim-persistent-n15"
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    assert [len(r["answers"]) for r in rows] == [15, 15]
    # the result is the study's analysis of those measurements, recomputed here independently
    res = json.loads((out / "results.json").read_text())
    for r in rows:
        answer, count = Counter(r["answers"]).most_common(1)[0]
        assert res["questions"][r["question"]] == {"n": 15, "mode": answer, "mode_share": count / 15}
    metrics = json.loads((out / "metrics.json").read_text())  # a study without dvc_metrics: all of them
    shares = [count / 15 for r in rows for _, count in [Counter(r["answers"]).most_common(1)[0]]]
    assert metrics["mean_mode_share"] == pytest.approx(sum(shares) / 2, abs=1e-12)
    # the study's artifacts and figure data were written by the pipeline
    assert (out / "artifacts/questions.txt").read_text() == "Name a colour.\nPick a colour.\n"
    assert (out / "artifacts/answers.txt").read_text().splitlines()[0].split() == rows[0]["answers"]
    assert (out / "plots/mode_share.csv").read_text().startswith("question,share\n")
    assert "<table>" in (out / "report.html").read_text()
    audit = json.loads((out / "audit_record.json").read_text())
    assert audit["measure"]["artifacts"] == ["answers.txt", "questions.txt"]
    assert audit["plan"]["plan_digest"] == json.loads((out / "plan.json").read_text())["plan_digest"]
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    names = [n for (n,) in con.execute("select e.name from runs r join experiments e using (experiment_id)")]
    con.close()
    assert names == ["lmaudit-tiny"]


def test_the_plugin_is_known_only_through_its_entry_point(tmp_path):
    with pytest.raises(InputError, match="'tiny' is not a known study"):
        get_study("tiny")  # this process does not have tests/plugins on its path
    proc = _run(tmp_path, "study=tiny", "model=sim_persistent", "study.n=0", "stage=plan")
    assert proc.returncode == 2 and "field 'n' must be >= 1" in proc.stderr
    assert not (tmp_path / "results").exists()
