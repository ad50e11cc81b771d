"""SIGTERM ends a run within seconds, also while inspect_ai reads a log in its own asyncio loop,
and leaves the run folder free for the next run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from draws_interop_helpers import SMALL, planted, run_inspect

from lmaudit.errors import Terminated
from lmaudit.interop.inspect_logs import read_log
from lmaudit.pipeline.record import signals_raise
from lmaudit.pipeline.rundir import LOCK

pytest.importorskip("inspect_ai")

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
#: how long a process may take to end after SIGTERM before the test calls it hung (a bound on
#: the outcome, not a timing measurement: the process ends in about a second)
ENDS_WITHIN_S = 60  # a bound past the watchdog's GRACE_S (25 s), not a timing assertion
N_SAMPLES, EPOCHS = 200, 4


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An inspect_ai log of 200 samples x 4 epochs, written by inspect_ai itself."""
    root = tmp_path_factory.mktemp("inspect")
    env = {"INSPECT_LOG_LEVEL": "error", "INSPECT_DISPLAY": "none", "INSPECT_CACHE_DIR": str(root / "cache")}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        rng = random.Random(7)
        seqs = {f"s{i:03d}": planted(rng, EPOCHS, 0.3) for i in range(N_SAMPLES)}
        return run_inspect(root / "logs", "mockllm/big", seqs, epochs=EPOCHS, temperature=1.0)


def test_a_sigterm_arriving_inside_inspects_reader_is_raised_once_the_read_returns(
    big_log, monkeypatch: pytest.MonkeyPatch
) -> None:
    import inspect_ai.log as api

    real = api.read_eval_log_samples
    raised_inside: list[int] = []
    read: list[int] = []

    def reading(*args: object, **kwargs: object) -> Iterator[object]:
        """inspect_ai's reader, with SIGTERM arriving while it reads the third sample."""
        for i, sample in enumerate(real(*args, **kwargs)):  # type: ignore[arg-type]
            if i == 2:
                try:
                    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside the reader
                except Terminated:
                    raised_inside.append(i)  # what asyncio would catch, had it been its loop
                    raise
            read.append(i)
            yield sample

    monkeypatch.setattr(api, "read_eval_log_samples", reading)
    with signals_raise(grace_s=None), pytest.raises(Terminated):
        read_log(big_log, "log")
    assert raised_inside == []  # never inside the library's code
    assert read == [0, 1, 2]  # the read under way finished; the next was not started


def _draws(log: Path, out: Path, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "run.py",
            "study=draws",
            f"study.import_path={log}",
            f"out_dir={out}",
            f"paths.cache={tmp_path / 'cache'}",
            f"paths.mlruns={tmp_path / 'mlruns'}",
            "mlflow.enabled=false",
            "progress=false",
            *SMALL,
        ],
        cwd=REPO,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ended(proc: subprocess.Popen[str]) -> tuple[int | None, str]:
    """The process's exit status and stderr, or (None, "") when it did not end in time."""
    try:
        _, err = proc.communicate(timeout=ENDS_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, ""
    return proc.returncode, err


def test_sigterm_while_an_inspect_log_is_read_ends_the_run_and_frees_its_folder(big_log, tmp_path) -> None:
    out = tmp_path / "run"
    # the signal lands at several points of the reading (the measure stage reads every sample)
    for delay in (0.3, 1.0, 1.7, 2.4):
        proc = _draws(big_log.parent, out, tmp_path)
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("lmaudit draws: stage=all run dir")  # the lock is held
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
        else:
            pytest.fail(f"the run ended before SIGTERM at {delay} s")
        status, err = _ended(proc)
        assert status == 143, (
            f"SIGTERM at {delay} s: exit status {status} (None: still running) {err[-2000:]}"
        )
        assert "error: stopped by signal SIGTERM" in err and "did not end within" not in err, err[-2000:]
        assert not (out / LOCK).exists()  # released as the run unwound
    again = _draws(big_log.parent, out, tmp_path)  # the folder is free: the next run starts and ends
    status, err = _ended(again)
    assert status == 0, err[-2000:]
    assert (out / "results.json").exists()


def test_a_run_that_swallows_sigterm_is_ended_within_seconds(tmp_path) -> None:
    # what asyncio does to an exception raised in its loop, done on purpose: the watchdog ends it
    script = textwrap.dedent(
        """
        import time
        from lmaudit.pipeline.record import signals_raise

        def swallow():
            while True:
                try:
                    time.sleep(0.05)
                except BaseException:
                    pass

        with signals_raise():
            try:  # the one exception is swallowed wherever it lands, even between two tries
                print("ready", flush=True)
                swallow()
            except BaseException:
                swallow()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    status, err = _ended(proc)
    assert status == 143, f"exit status {status} (None: still running): {err[-2000:]}"
    assert "stopped by signal SIGTERM; the run did not end within 25 s of it" in err, err
