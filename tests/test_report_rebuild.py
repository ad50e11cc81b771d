"""`lmaudit report <run dir>` rebuilds a run's report from its records alone (as after `dvc
pull`, which does not carry reports): the same page the run wrote, byte for byte, with no model
and no MLflow run."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmaudit.console import main as lmaudit_main
from lmaudit.pipeline import run

REPO = Path(__file__).resolve().parents[1]

RUNS = {
    "qq": ("model=sim_projective", "items=sim_demo"),
    "draws": ("study=draws", "model=sim_persistent", "study.permutations=199", "study.sims_per_step=50"),
    "judge": ("study=judge", "model=sim_judge"),
    "choir": (
        "study=choir",
        "ensemble=sim",
        "study.embedder.kind=sim",
        "study.question_ids=[H001,H002,H003]",
        "study.generations=3",
        "study.shuffles=50",
        "study.permutations=50",
        "study.n_boot=50",
        "study.n_null=20",
    ),
}


@pytest.mark.parametrize("study", sorted(RUNS))
def test_a_rebuilt_report_is_the_page_the_run_wrote(make_cfg, tmp_path, study):
    run(make_cfg(*RUNS[study], "mlflow.enabled=false", name=study))
    out = tmp_path / study
    written = (out / "report.html").read_bytes()
    (out / "report.html").unlink()
    records = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert lmaudit_main(["report", str(out), "--conf", str(REPO / "conf")]) == 0
    assert (out / "report.html").read_bytes() == written
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "report.html"} == records


def test_a_folder_without_results_is_refused(tmp_path, capsys):
    assert lmaudit_main(["report", str(tmp_path), "--conf", str(REPO / "conf")]) == 2
    assert "no results.json here" in capsys.readouterr().err
