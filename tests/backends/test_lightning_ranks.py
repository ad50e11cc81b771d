"""The Lightning runner's ranks on a tiny random model: a rank that dies fails the run at once,
naming it, and no rank outlives the run (a run killed outright takes its ranks with it; its
scratch folder goes when the next pool starts)."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("pytorch_lightning")
psutil = pytest.importorskip("psutil")

from tiny_hf import qq_requests, write_model, write_tokenizer  # noqa: E402

from lmaudit.backends.cached import CachedBackend  # noqa: E402
from lmaudit.backends.hf.lightning import pool as rank_pool  # noqa: E402
from lmaudit.backends.registry import build_backend  # noqa: E402
from lmaudit.errors import BackendError  # noqa: E402
from lmaudit.provenance.cache import ResponseCache  # noqa: E402

HERE = Path(__file__).resolve().parent
WAIT_S = 120  # how long a rank may take to appear or to go before the test fails (never reached)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-ranks")
    write_model(path, "gemma3", len(write_tokenizer(path)))
    return path


def _cfg(path: Path) -> dict[str, Any]:
    return {
        "backend": "hf",
        "name": "tiny",
        "model": str(path),
        "dtype": "float32",
        "runner": "lightning",
        "devices": 2,
    }


def _ranks(parent: int) -> dict[int, Any]:
    """``{rank: process}`` of the pool workers ``parent`` started."""
    out = {}
    for p in psutil.Process(parent).children():
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if "lmaudit.backends.hf.lightning.runner" in cmd:
            out[int(cmd[cmd.index("lmaudit.backends.hf.lightning.runner") + 2])] = p
    return out


def _wait_for(what: str, check: Any) -> Any:
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.01)
    pytest.fail(f"no {what} within {WAIT_S} s")


def test_a_rank_killed_before_it_joins_fails_the_call_naming_it(tiny: Path, tmp_path: Path) -> None:
    backend = build_backend(_cfg(tiny))
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache"), progress=False)
    failed: list[str] = []

    def call() -> None:
        try:
            cached.label_logprobs(qq_requests(4), top_k=5)
        except BackendError as e:
            failed.append(str(e))

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    try:
        # rank 1, killed as the OOM killer would, while it still imports (before the process group)
        _wait_for("rank 1", lambda: _ranks(os.getpid()).get(1)).kill()
        worker.join(WAIT_S)
        assert not worker.is_alive(), "the call still waits for the dead rank"
        assert failed and re.match(
            r"lightning runner: worker rank 1 exited with code -9; its log ends", failed[0]
        )
    finally:
        backend.close()


def test_a_run_killed_outright_takes_its_ranks_with_it(tiny: Path, tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(HERE)!r})
        from tiny_hf import qq_requests
        from lmaudit.backends.cached import CachedBackend
        from lmaudit.backends.registry import build_backend
        from lmaudit.provenance.cache import ResponseCache
        backend = build_backend({_cfg(tiny)!r})
        CachedBackend(backend, ResponseCache({str(tmp_path / "cache")!r}), progress=False).label_logprobs(
            qq_requests(4), top_k=5
        )
        """
    )
    run = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        ranks = _wait_for("two ranks", lambda: (r := _ranks(run.pid)) and len(r) == 2 and r)
        cmd = ranks[0].cmdline()
        folder = Path(cmd[cmd.index("lmaudit.backends.hf.lightning.runner") + 1])
        ranks[1].kill()  # rank 0 is left waiting for it in the rendezvous ...
        run.send_signal(signal.SIGKILL)  # ... and the run is killed outright
        run.wait(WAIT_S)
        gone = _wait_for(
            "end of rank 0", lambda: not ranks[0].is_running() or ranks[0].status() == psutil.STATUS_ZOMBIE
        )
        assert gone
        assert folder.is_dir()  # a killed run cannot remove it ...
        rank_pool._remove_stale_pools()  # ... the next pool's start does
        assert not folder.exists()
    finally:
        if run.poll() is None:
            run.kill()
