"""Out-of-range settings and unsafe run names are refused when the config is composed, before a
run directory exists, with one line naming the field and what it allows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmaudit.errors import ConfigRangeError, InputError
from lmaudit.pipeline import run

REPO = Path(__file__).resolve().parents[1]

OUT_OF_RANGE = [
    (("model=sim_projective", "study.epsilon=-0.1"), "study.epsilon", ">= 0"),
    (("model=sim_projective", "study.float_tol=-1"), "study.float_tol", ">= 0"),
    (("model=sim_projective", "estimand=sampled", "estimand.n=-5"), "study.estimand.n", ">= 1"),
    (("model=sim_projective", "estimand=sampled", "estimand.n=0"), "study.estimand.n", ">= 1"),
    (("model=sim_projective", "mapping.labels=[A,A]"), "study.mapping.labels", "distinct"),
    (("model=sim_projective", "mapping.labels=[A]"), "study.mapping.labels", "exactly 2"),
    (("model=sim_projective", "study.gates.g3.alpha=5"), "study.gates.g3.alpha", "< 1"),
    (("model=sim_projective", "estimand.kind=exact"), "study.estimand.kind", "logprob, sampled"),
    (("model=sim_projective", "model.batch_size=0"), "model.batch_size", ">= 1"),
    (("study=draws", "model=sim_persistent", "study.n=1"), "study.n", ">= 2"),
    (("study=draws", "model=sim_persistent", "study.rho_min=0.9"), "rho_min", "rho_max"),
    (("study=draws", "model=sim_persistent", "study.normalise.kind=x"), "study.normalise.kind", "regex"),
    (("study=judge", "model=sim_judge", "study.k=0"), "study.k", ">= 1"),
    (("study=judge", "model=sim_judge", "study.isolation=x"), "study.isolation", "fresh"),
    (
        ("model=openai", "model.base_url=http://127.0.0.1:9/v1", "model.model=m", "model.timeout_s=0"),
        "model.timeout_s",
        "> 0",
    ),
]


@pytest.mark.parametrize(("overrides", "field", "allowed"), OUT_OF_RANGE)
def test_out_of_range_field_is_refused_before_the_run_dir_exists(
    make_cfg, tmp_path, overrides, field, allowed
):
    with pytest.raises(ConfigRangeError) as e:
        run(make_cfg(*overrides, "mlflow.enabled=false", name="r"))
    msg = str(e.value)
    assert field in msg and allowed in msg and "\n" not in msg
    assert not (tmp_path / "r").exists()


def test_run_py_prints_one_line_and_exits_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "run.py", "model=sim_projective", "study.epsilon=-0.1", f"out_dir={tmp_path / 'r'}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: config out of range: study.epsilon = -0.1 is out of range (allowed: >= 0)"
    ]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "override",
    ["run_name=../../etc", "run_name=/tmp/abs", "model.name=../../x", "run_name=..", "run_name=a/b"],
)
def test_names_that_leave_paths_results_are_refused(make_cfg, tmp_path, override):
    cfg = make_cfg("model=sim_projective", "mlflow.enabled=false", override)
    cfg.out_dir = None  # the run dir derives from paths.results and the run name
    before = {p for p in tmp_path.rglob("*")}
    with pytest.raises(InputError, match="cannot name a run folder"):
        run(cfg)
    assert {p for p in tmp_path.rglob("*")} == before
    assert not (tmp_path.parent / "x").exists() and not (tmp_path.parent / "etc").exists()


def test_a_safe_run_name_lands_under_paths_results(make_cfg, tmp_path):
    cfg = make_cfg("model=sim_projective", "mlflow.enabled=false", "items=sim_demo", "run_name=ok-1")
    cfg.out_dir = None
    run(cfg)
    assert (tmp_path / "results" / "qq" / "ok-1" / "results.json").exists()
