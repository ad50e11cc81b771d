"""A sweep that splits the ensemble across jobs is analysed together when it ends, and the
combined analysis equals one job that elicits every member."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from choir_quick import QUICK_CHOIR
from lmaudit.pipeline import run

REPO = Path(__file__).resolve().parents[3]
M1 = "{backend: sim, name: m1, agent: freelist, params: {signature: 1}}"
M2 = "{backend: sim, name: m2, agent: freelist, params: {signature: 2}}"
M3 = "{backend: sim, name: m3, agent: freelist, params: {signature: 3}}"
DESIGN = (
    "study.question_ids=[H001,H002]",
    "study.templates=[A]",
    "study.personas=[archivist]",
    "study.generations=2",
    *QUICK_CHOIR,
    "mlflow.enabled=false",
    "progress=false",
)


def test_member_jobs_combine_into_the_one_job_analysis(make_cfg, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            "study=choir",
            f"study.ensemble.members=[{M1},{M2}],[{M3}]",
            *DESIGN,
            f"paths.results={tmp_path / 'results'}",
            f"paths.cache={tmp_path / 'cache'}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    combined = json.loads((tmp_path / "sweep/combined-choir/results.json").read_text())
    assert combined["design"]["models"] == ["m1", "m2", "m3"]
    run(make_cfg("study=choir", f"study.ensemble.members=[{M1},{M2},{M3}]", *DESIGN, name="one"))
    one = json.loads((tmp_path / "one/results.json").read_text())
    for key in ("questions", "summary", "recoverability", "leakage", "width_bins"):
        assert combined[key] == one[key], key
