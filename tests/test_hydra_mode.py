"""Hydra's run-mode probe is skipped only where its answer is known: lmaudit's configuration
never sets ``hydra.mode``, so the probe (a whole composition) gives ``None`` for every option."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode

from lmaudit.config.hydra_mode import probe_decided, skip_mode_probe
from lmaudit.config.overrides import canonical
from test_config_and_protocol import OPTIONS

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
ORIGINAL_GET_MODE = Hydra.get_mode


def _probe(overrides: list[str]) -> object:
    """Hydra's own probe (the composition ``@hydra.main`` makes before it runs)."""
    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2(task_name="run", config_search_path=create_config_search_path(str(CONF)))
    try:
        return ORIGINAL_GET_MODE(hydra, config_name="config", overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.parametrize("override", ["", *OPTIONS])
def test_the_configuration_never_sets_hydra_mode(override: str) -> None:
    args, _ = canonical([override] if override else [])
    assert probe_decided(args)
    assert _probe(args) is None  # what the skipped probe answers


def test_a_command_line_that_may_set_the_mode_keeps_the_probe() -> None:
    assert _probe(["hydra.mode=MULTIRUN"]) == RunMode.MULTIRUN  # the answer the skip would lose
    for args in (
        ["hydra.mode=MULTIRUN"],
        ["+hydra.mode=RUN"],
        ["model=sim_projective", "hydra/launcher=slurm"],
        ["hydra=custom"],
        ["--config-dir", "/elsewhere"],
        ["--config-name=other"],
        ["-cn", "other"],
    ):
        assert not probe_decided(args), args
    assert probe_decided(["model=sim_projective", "study.gates.g3.n=10", "-m", "framing=track_m,track_p"])
    assert probe_decided(["hydra_like_name=1"]) and probe_decided(["out_dir=hydra"])


def test_skip_replaces_the_probe_only_when_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Hydra, "get_mode", ORIGINAL_GET_MODE)
    assert not skip_mode_probe(["hydra.mode=MULTIRUN"])
    assert Hydra.get_mode is ORIGINAL_GET_MODE
    assert skip_mode_probe(["model=sim_projective"])
    assert Hydra.get_mode is not ORIGINAL_GET_MODE
    assert Hydra.get_mode(None, "config", []) is None  # type: ignore[arg-type]
    assert skip_mode_probe(["model=sim_projective"])  # a second call keeps the same replacement


def test_run_py_without_the_probe_runs_one_job_and_a_sweep(tmp_path: Path) -> None:
    """``run.py`` composes once per job; a single run is a RUN job, ``-m`` a MULTIRUN sweep."""
    script = f"""
import runpy, sys
from hydra._internal.hydra import Hydra
calls = []
compose = Hydra.compose_config
def counted(self, *a, **k):
    calls.append(k.get("run_mode"))
    return compose(self, *a, **k)
Hydra.compose_config = counted
sys.argv = ["run.py", *sys.argv[1:]]
try:
    runpy.run_path({str(REPO / "run.py")!r}, run_name="__main__")
finally:
    print("COMPOSITIONS", [str(c) for c in calls])
"""
    common = [
        "model=sim_projective",
        "mlflow.enabled=false",
        "progress=false",
        f"paths.results={tmp_path / 'results'}",
        f"paths.cache={tmp_path / 'cache'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    one = subprocess.run(
        [sys.executable, "-c", script, *common[:-1]], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert one.returncode == 0, one.stderr
    assert "COMPOSITIONS ['RunMode.RUN']" in one.stdout  # the probe's MULTIRUN composition is gone
    assert "QQ: 18 items" in one.stdout
    sweep = subprocess.run(
        [sys.executable, "-c", script, "-m", *common, "framing=track_m,track_p"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert sweep.returncode == 0, sweep.stderr
    assert "RunMode.RUN" not in sweep.stdout.split("COMPOSITIONS")[-1]  # a sweep, composed as one
    assert sweep.stdout.count("QQ: ") == 2  # and both of its jobs ran
