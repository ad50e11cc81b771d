"""A registered run says how its predictions came out, and loudly when none could be tested; a
judge import says which recorded conditions the selected set leaves out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}


def _run_py(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "run.py",
            *args,
            "progress=false",
            "mlflow.enabled=false",
            f"out_dir={tmp_path / 'run'}",
            f"paths.cache={tmp_path / 'cache'}",
        ],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_registration_whose_metrics_match_no_data_warns_loudly(tmp_path):
    # the seed's registration names families (gpt-oss:120b, ...) the example file does not hold
    proc = _run_py(
        tmp_path,
        "prereg=draws_seed",
        f"study.import_path={REPO / 'data/draws/example_import.jsonl'}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "registered predictions (draws_seed):" in proc.stdout
    assert "  P1: not evaluable (families.gpt-oss:120b.holm_p: metric not in results;" in proc.stdout
    assert "WARNING: none of the 4 predictions of registration 'draws_seed' could be evaluated" in proc.stderr
    preds = json.loads((tmp_path / "run" / "results.json").read_text())["predictions"]
    assert {p["outcome"] for p in preds} == {"not evaluable"}


def test_a_registration_with_evaluable_predictions_prints_their_outcomes(tmp_path):
    proc = _run_py(tmp_path, "prereg=judge_sim_attraction_v2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    start = lines.index("registered predictions (judge_sim_attraction_v2):")
    outcomes = [ln for ln in lines[start + 1 :] if ln.startswith("  P")]
    assert outcomes and all(": held" in ln or ": not held" in ln for ln in outcomes)
    assert "WARNING" not in proc.stderr


def test_a_judge_import_names_the_conditions_the_selected_set_leaves_out(tmp_path):
    folder = tmp_path / "import"
    folder.mkdir()
    seed = REPO / "tests/data/judge/seed_001"
    for f in seed.glob("*.json"):
        (folder / f.name).write_bytes(f.read_bytes())
    (folder / "results_SWAP.json").write_bytes((seed / "results_P0.json").read_bytes())
    proc = _run_py(tmp_path, "study=judge", "judge/condition=wrapper", f"study.import_dir={folder}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (
        "results_SWAP.json not analysed: the selected condition set holds only P0, PA, PB, PAB" in proc.stderr
    )
