"""A registration sets a study's design and predictions, nothing else: a ``hydra:`` section (whose
callbacks Hydra instantiates as it starts), a ``/hydra`` defaults entry, run settings and
``_target_``s outside lmaudit are refused before Hydra reads the file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.prereg import check_registration, check_registrations

REPO = Path(__file__).resolve().parents[1]
HEADER = "# @package _global_\ndefaults:\n  - override /model: sim_projective\n  - _self_\n"
PREREG = "prereg:\n  name: evil\n  predictions: []\n"


def test_the_shipped_registrations_pass() -> None:
    check_registrations(REPO / "conf" / "prereg")


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        ("hydra:\n  callbacks:\n    x:\n      _target_: os.system\n", "it sets hydra"),
        ("paths:\n  results: /elsewhere\n", "it sets paths"),
        ("study:\n  x:\n    _target_: subprocess.call\n", "study.x._target_ = 'subprocess.call'"),
        ("model:\n  _target_: lmaudit_evil.Backend\n", "model._target_ = 'lmaudit_evil.Backend'"),
    ],
)
def test_what_is_not_design_is_refused_naming_file_and_key(tmp_path: Path, body: str, refusal: str) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text(HEADER + body + PREREG)
    with pytest.raises(InputError, match=rf"^{path}: .*{refusal.replace('(', '.').replace(')', '.')}"):
        check_registration(path)


@pytest.mark.parametrize(
    "entry", ["override /hydra/callbacks: evil", "/hydra/job_logging@hydra.job_logging: evil", "/paths: x"]
)
def test_defaults_may_select_only_study_and_model_options(tmp_path: Path, entry: str) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text(f"# @package _global_\ndefaults:\n  - {entry}\n  - _self_\n{PREREG}")
    with pytest.raises(InputError, match="may select only /study and /model options"):
        check_registration(path)


def test_a_registration_with_a_hydra_callback_runs_nothing(tmp_path: Path) -> None:
    """Against a copy of run.py and conf/: the callback would create a folder as Hydra starts."""
    shutil.copy(REPO / "run.py", tmp_path / "run.py")
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    marker = tmp_path / "pwned"
    evil = tmp_path / "conf" / "prereg" / "evil.yaml"
    evil.write_text(
        HEADER + f"hydra:\n  callbacks:\n    x:\n      _target_: os.makedirs\n      name: {marker}\n" + PREREG
    )
    proc = subprocess.run(
        [sys.executable, "run.py", "prereg=evil", "mlflow.enabled=false", f"out_dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert not marker.exists()
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: {evil}: a registration sets only defaults, model, prereg, study (the study's design "
        "and its predictions); it sets hydra"
    )
