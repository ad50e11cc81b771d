"""``python run.py`` in a subprocess, and the checks of a run refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_cli(
    *args: str,
    timeout: float = 300,
    env: Mapping[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python run.py *args`` in the repository, its output captured as text; ``env``
    defaults to this one's with ``HF_HUB_OFFLINE=1``."""
    return subprocess.run(
        [sys.executable, "run.py", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(env) if env is not None else {**os.environ, "HF_HUB_OFFLINE": "1"},
        preexec_fn=preexec_fn,
    )


def scratch_paths(tmp_path: Path) -> tuple[str, str, str]:
    """Overrides that put a run's results, response cache and MLflow store under ``tmp_path``."""
    return (
        f"paths.results={tmp_path / 'results'}",
        f"paths.cache={tmp_path / 'cache'}",
        f"paths.mlruns={tmp_path / 'mlruns'}",
    )


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one ``error:`` line of a refused run, which printed no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def assert_nothing_half_written(run_dir: Path, *also: str) -> None:
    """No measurements, results (nor ``also``) and no ``.tmp`` file in ``run_dir``."""
    left = {p.name for p in run_dir.rglob("*")} if run_dir.exists() else set()
    assert not left & {"measurements.jsonl", "results.json", *also}, left
    assert not [n for n in left if n.endswith(".tmp")], left
