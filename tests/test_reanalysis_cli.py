"""The README's re-analysis, ``python run.py stage=analyze measurements=<file>``, of a file
measured by another model than the config's default, without repeating ``model=``: for every
study it reproduces the measuring run's results, and the run folder, its MLflow run name and
its audit record name the model that was measured."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from choir_quick import QUICK_CHOIR
from cli_runs import run_cli, scratch_paths

CHOIR = (
    "study=choir",
    "study.question_ids=[H001]",
    "study.personas=[archivist]",
    *QUICK_CHOIR,
)

#: case -> (the measuring run's overrides that choose its models, the study's own overrides
#: both runs share, what the run folder's name holds, (a param of the plan, its measured value))
CASES = {
    "qq": (("model=sim_projective",), ("items=sim_demo",), "-sim-projective-", ("model", "sim-projective")),
    "judge": (("model=sim_judge",), ("study=judge",), "-sim-judge", ("model", "sim-judge")),
    "draws": (("model=sim_persistent",), ("study=draws",), "-sim-persistent", ("model", "sim-persistent")),
    # the demo ensemble (the run's model beside three simulators) with a sim free-list generator
    # as the run's model; re-analysed without ensemble=, which comes from the plan
    "choir": (
        ("model=sim_projective", "model.agent=freelist", "model.name=sim-free", "ensemble=demo"),
        CHOIR,
        "-demo-sim-free+",
        ("model", "sim-free"),
    ),
    # another ensemble: its members are the models measured
    "choir-ensemble": (("ensemble=sim",), CHOIR, "-sim-sim-1+sim-2+sim-3+sim-4-", ("ensemble", "sim")),
}


def _run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        *scratch_paths(tmp_path),
        "progress=false",
        "mlflow.enabled=false",
        *overrides,
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_reanalysis_of_another_models_file_without_model(tmp_path: Path, case: str) -> None:
    model, shared, named, (group, measured_name) = CASES[case]
    measured = _run(tmp_path, *model, *shared, f"out_dir={tmp_path / 'measured'}")
    assert measured.returncode == 0, measured.stderr[-3000:]
    source = tmp_path / "measured"

    again = _run(tmp_path, *shared, "stage=analyze", f"measurements={source / 'measurements.jsonl'}")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Traceback" not in again.stderr, again.stderr
    (folder,) = (tmp_path / "results" / case.split("-")[0]).iterdir()
    assert named in folder.name and "gemma" not in folder.name, folder.name  # what was measured
    assert (folder / "results.json").read_bytes() == (source / "results.json").read_bytes()
    audit = json.loads((folder / "audit_record.json").read_text())
    assert audit["mlflow"]["run_name"] == folder.name
    assert audit["mlflow"]["params"][group]["name"] == measured_name
    plan = json.loads((source / "plan.json").read_text())
    assert audit["mlflow"]["params"][group] == plan["config"][group]


def test_reanalysis_in_the_measuring_runs_folder_without_model(tmp_path: Path) -> None:
    """``stage=analyze out_dir=<the run>``: the folder is given, and the MLflow run name and
    audit record still name the measured model."""
    run = tmp_path / "measured"
    measured = _run(tmp_path, "model=sim_persistent", "study=draws", "stage=measure", f"out_dir={run}")
    assert measured.returncode == 0, measured.stderr[-3000:]
    again = _run(tmp_path, "study=draws", "stage=analyze", f"out_dir={run}")
    assert again.returncode == 0, again.stderr[-3000:]
    audit = json.loads((run / "audit_record.json").read_text())
    assert audit["mlflow"]["run_name"].endswith("-sim-persistent"), audit["mlflow"]["run_name"]
    assert audit["mlflow"]["params"]["model"]["name"] == "sim-persistent"
