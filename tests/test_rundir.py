"""A run directory belongs to one run at a time and to one config: a second process is refused
naming the holder, a killed run's lock is taken over, another config's plan or results are not
replaced without overwrite=true, and a stage's outputs are replaced as a set."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.pipeline import run
from stub_server import stub_model_args

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}


def _run_py(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "run.py", *args],
        cwd=REPO,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_two_processes_one_run_dir(openai_stub, tmp_path):
    state, url = openai_stub
    state.delay = 0.5  # the first run holds the directory while it measures
    out = tmp_path / "shared"
    common = (
        f"out_dir={out}",
        f"paths.cache={tmp_path / 'cache'}",
        f"paths.mlruns={tmp_path / 'mlruns'}",
        "progress=false",
        "items=sim_demo",
        "study.gates.g3.enabled=false",
    )
    first = _run_py(*stub_model_args(url), *common)
    try:
        lock = out / ".lmaudit.lock"
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text().strip()):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = _run_py("model=sim_projective", *common)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2, err
        assert (
            "is in use by another lmaudit run" in err
            and f"pid {first.pid} on " in err
            and "started 20" in err
        )
        assert not (out / "results.json").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    # the killed run's lock is stale: the same run started again takes it over and completes
    state.delay = 0.0
    third = _run_py(*stub_model_args(url), *common)
    stdout, err = third.communicate(timeout=300)
    assert third.returncode == 0, err[-3000:]
    assert f"taking over the lock left by a run that ended without releasing it (pid {first.pid} " in stdout
    assert (out / "results.json").exists() and not (out / ".lmaudit.lock").exists()


def test_results_of_other_measurements_are_not_replaced(make_cfg, tmp_path):
    base = ("model=sim_projective", "mlflow.enabled=false", "items=sim_demo")
    run(make_cfg(*base, name="mine"))
    run(make_cfg("model=sim_repetition", "mlflow.enabled=false", "items=sim_demo", name="theirs"))
    out = tmp_path / "mine"
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    other = f"measurements={tmp_path / 'theirs' / 'measurements.jsonl'}"
    with pytest.raises(
        InputError, match=r"results\.json: holds results of other measurements.*overwrite=true"
    ):
        run(make_cfg(*base, "stage=analyze", other, name="mine"))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    run(make_cfg(*base, "stage=analyze", other, "overwrite=true", name="mine"))
    res = json.loads((out / "results.json").read_text())
    theirs = json.loads((tmp_path / "theirs" / "results.json").read_text())
    assert res["source"] == theirs["source"]


def test_run_dir_of_another_config_is_refused_for_every_stage_that_plans(make_cfg, tmp_path):
    run(make_cfg("model=sim_projective", "mlflow.enabled=false", "items=sim_demo", name="d"))
    out = tmp_path / "d"
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for stage in ("plan", "measure", "all"):
        with pytest.raises(InputError, match=r"differs in: model\.agent, model\.name"):
            run(
                make_cfg(
                    "model=sim_mixture", "mlflow.enabled=false", "items=sim_demo", f"stage={stage}", name="d"
                )
            )
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def _user_folder(out: Path) -> dict[Path, bytes]:
    """A folder of the user's own files, some named as lmaudit names its outputs."""
    (out / "plots").mkdir(parents=True)
    (out / "plots" / "figure1.svg").write_text("<svg/>")
    (out / "results.json").write_text('{"mine": true}')
    (out / "report.html").write_text("<p>my notes</p>")
    (out / "measurements.jsonl").write_text('{"not": "lmaudit"}\n')
    return {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_that_is_not_an_lmaudit_run_is_refused_untouched(make_cfg, tmp_path, overwrite):
    out = tmp_path / "mine"
    before = _user_folder(out)
    base = ("model=sim_projective", "mlflow.enabled=false", "items=sim_demo", f"out_dir={out}")
    for stage in ("plan", "measure", "all", "analyze", "report"):
        extra = (f"measurements={out / 'measurements.jsonl'}",) if stage == "analyze" else ()
        with pytest.raises(
            InputError, match=r"is not an lmaudit run folder.*holds: measurements\.jsonl, plots, "
        ):
            run(make_cfg(*base, f"stage={stage}", f"overwrite={str(overwrite).lower()}", *extra))
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before, stage
    # an lmaudit run's folder stays the user's to reuse: a new one, or an empty one, is taken
    (tmp_path / "empty").mkdir()
    run(make_cfg(*base[:-1], f"out_dir={tmp_path / 'empty'}"))
    run(make_cfg(*base[:-1], f"out_dir={tmp_path / 'empty'}", "stage=analyze"))
    assert json.loads((tmp_path / "empty" / "results.json").read_text())["source"]


#: run.py with a file-size limit (RLIMIT_FSIZE, a real EFBIG from the kernel) set just before the
#: report is written: the results, metrics and plots of the run are written under no limit, the
#: report under one it exceeds, and the audit record's failure entry under the same limit
_LIMITED_REPORT = """
import resource, runpy, signal, sys
import lmaudit.pipeline.stages as stages
write = stages.atomic_write_text
def limited(path, text, *a, **k):
    if path.name == "report.html":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_BYTES, MAX_BYTES))
    return write(path, text, *a, **k)
stages.atomic_write_text = limited
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""
REPORT_LIMIT = 10_000


def test_a_failed_report_leaves_no_stale_report_beside_new_results(tmp_path):
    out = tmp_path / "d"
    args = (
        "model=sim_projective",
        "items=sim_demo",
        "mlflow.enabled=false",
        "progress=false",
        f"out_dir={out}",
        f"paths.cache={tmp_path / 'cache'}",
    )
    assert _run_py(*args).wait(timeout=300) == 0
    # the report exceeds the limit; the audit record, rewritten when the report fails, does not
    assert (out / "report.html").stat().st_size > REPORT_LIMIT > (out / "audit_record.json").stat().st_size
    old_report = (out / "report.html").read_bytes()
    again = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _LIMITED_REPORT.replace("MAX_BYTES", str(REPORT_LIMIT)),
            *args,
            "stage=analyze",
        ],
        cwd=REPO,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = again.communicate(timeout=300)
    assert again.returncode != 0 and "File too large" in err
    assert (out / "results.json").exists()
    # the earlier report is gone with the results it described; none stands beside the new ones
    assert not (out / "report.html").exists() or (out / "report.html").read_bytes() != old_report
    audit = json.loads((out / "audit_record.json").read_text())
    assert "report" not in audit


def test_results_json_cannot_hold_are_refused_before_the_previous_analysis_is_removed(
    make_cfg, tmp_path, monkeypatch
):
    """A number JSON has no form for (NaN) is refused naming its field, and the run folder keeps
    the analysis it had: nothing of it is removed before the new results are known to write."""
    import dataclasses

    from lmaudit.studies.qq import analysis

    base = ("model=sim_projective", "mlflow.enabled=false", "items=sim_demo")
    run(make_cfg(*base))
    out = tmp_path / "run"
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".lmaudit.lock"}
    assert (out / "results.json") in before and (out / "report.html") in before
    analyze_rows = analysis.analyze_rows

    def with_nan(*args, **kwargs):  # type: ignore[no-untyped-def]
        res = analyze_rows(*args, **kwargs)
        return dataclasses.replace(
            res, across_items=dataclasses.replace(res.across_items, confidence=float("nan"))
        )

    monkeypatch.setattr(analysis, "analyze_rows", with_nan)
    with pytest.raises(
        ValueError, match=r"^QQResults: field 'summary\.confidence' is nan, which JSON cannot hold$"
    ):
        run(make_cfg(*base, "stage=analyze"))
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".lmaudit.lock"}
    assert after == before
