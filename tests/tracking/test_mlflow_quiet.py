"""MLflow's INFO lines (creating the SQLite store's tables) do not interleave with a run's own
output; a run that makes a new store prints only lmaudit's lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_new_store_is_made_without_mlflow_info_lines(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_LOGGING_LEVEL"}
    env.update(PYTHONPATH=str(REPO / "src"), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            "model=sim_projective",
            "items=sim_demo",
            f"out_dir={tmp_path / 'run'}",
            f"paths.mlruns={tmp_path / 'mlruns'}",
            f"paths.cache={tmp_path / 'cache'}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "mlruns" / "mlflow.db").exists()
    assert "INFO mlflow" not in proc.stderr + proc.stdout, proc.stderr
