"""The ranks behind ``runner=lightning``: worker processes that answer job files into the response cache.

A :class:`RankPool` cuts nothing and computes nothing itself: a subclass (the ``hf`` model's
:class:`~lmaudit.backends.hf.lightning.runner.LightningRunner`, the MiniLM embedder's
:class:`~lmaudit.backends.hf.lightning.embed.LightningEmbedder`) turns a call into shards and
:meth:`RankPool._run` writes them as one job file into a scratch folder; every rank answers its
shards into the cache and writes ``done-<job>.<rank>.json`` (or its traceback). What a rank
runs is the subclass's worker class (a :class:`RankWorker`, handed to the pool: the ``hf``
model's :class:`~lmaudit.backends.hf.lightning.runner.Worker`, the embedder's
:class:`~lmaudit.backends.hf.lightning.embed.EmbedWorker`), built from the pool's ``setup.json``;
this module imports neither.

On one machine the ranks are ``devices`` worker processes (``python -m <the worker's module>``,
whose ``__main__`` block calls :func:`run_rank` with its worker class), started on first use and
kept until :meth:`RankPool.close`;
each joins a process group through Lightning's own environment (``LOCAL_RANK``, ``MASTER_ADDR``
..., as torchrun would set them), so Lightning launches nothing itself. Under SLURM (the ``hf``
runner only) every task is a rank; task 0 answers in-process and the others serve
(:func:`serve`) until it is done (docs/scale.md).

**Ranks never outlive the run, and a dead rank fails it at once.** While a job runs, every
local rank is watched, not only the one whose answer is awaited: a rank that dies (an OOM kill
before it joins the process group leaves the others waiting for torch's 30-minute rendezvous)
fails the call within one poll, naming the rank, its exit code and its log. On Linux each rank
asks for its parent's death as ``SIGKILL`` (``prctl(PR_SET_PDEATHSIG)``, its first act: the
death of the thread that started it, which is the run's, as the pipeline calls backends from
its main thread), so a run killed outright takes its ranks with it, and the scratch folder of a run whose process is gone
(``lmaudit-runner-<pid>-*`` in the temporary directory) is removed by the next pool that starts.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from lmaudit.backends.hf.packed.forward import ForwardStats
from lmaudit.errors import BackendError
from lmaudit.provenance.io import atomic_write_text

POLL_S = 0.02


def contiguous_runs(costs: Sequence[float], world: int) -> list[list[int]]:
    """Cut items ``0..len(costs)-1``, in order, into ``world`` contiguous runs of about equal
    total cost: an item goes to the rank whose share holds its cost's midpoint."""
    total = float(sum(costs)) or 1.0
    runs: list[list[int]] = [[] for _ in range(world)]
    before = 0.0
    for i, c in enumerate(costs):
        runs[min(world - 1, int((2 * before + c) * world // (2 * total)))].append(i)
        before += c
    return runs


def interleave(runs: Sequence[Sequence[Any]], empty: Any) -> list[Any]:
    """The shards of every rank's run in the order Lightning's distributed sampler deals them
    (shard ``j`` to rank ``j % world``), each run padded with ``empty`` to the longest: rank
    ``r`` then answers exactly ``runs[r]``, in order, and every rank gets as many shards."""
    out: list[Any] = []
    for j in range(max((len(r) for r in runs), default=0)):
        for run in runs:
            out.append(run[j] if j < len(run) else empty)
    return out


def slurm_rank() -> tuple[int, int] | None:
    """(rank, world size) when this process is one of several SLURM tasks started by srun."""
    n = os.environ.get("SLURM_NTASKS")
    if not n or int(n) < 2 or os.environ.get("SLURM_JOB_NAME") in {"bash", "interactive"}:
        return None
    return int(os.environ.get("SLURM_PROCID", "0")), int(n)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_POOL_PREFIX = "lmaudit-runner-"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent: int) -> None:
    """In a rank, first thing: be sent SIGKILL when the run's process ``parent`` dies (Linux),
    and leave at once if it is already gone (it may have died before this call)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        sys.exit(f"the run's process {parent} is gone")


def _remove_stale_pools() -> None:
    """Remove the scratch folders of runs whose process is gone (killed before their close)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_POOL_PREFIX}*-*"):
        pid = folder.name.removeprefix(_POOL_PREFIX).split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:  # another user's live process
            continue


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def slurm_pool() -> Path:
    base = Path(os.environ.get("LMAUDIT_RUNNER_DIR") or Path.home() / ".cache" / "lmaudit" / "runner")
    step = os.environ.get("SLURM_STEP_ID", "0")
    return base / f"slurm-{os.environ.get('SLURM_JOB_ID', 'job')}-{step}"


def set_threads(setup: Mapping[str, Any]) -> None:
    """On CPU, ``cores // devices`` torch threads for this rank."""
    import torch

    if setup["accelerator"] == "cpu" or not torch.cuda.is_available():
        torch.set_num_threads(max(1, _cores() // int(setup["devices"])))


class RankWorker(Protocol):
    """What one rank runs: built from the pool's setup (it loads the model), then it answers
    one job at a time into the cache, returning ``{"written": ..., "stats": {...}}``."""

    def __init__(self, setup: dict[str, Any]) -> None: ...

    def answer(self, job: dict[str, Any]) -> dict[str, Any]: ...


def serve(pool: Path, rank: int, parent: int | None, worker_class: type[RankWorker]) -> None:
    """Answer the pool's jobs in order until it is stopped (or the parent process is gone)."""
    worker = worker_class(json.loads((pool / "setup.json").read_text()))
    n = 1
    while True:
        job_file = pool / f"job-{n}.json"
        if job_file.exists():
            try:
                done = worker.answer(json.loads(job_file.read_text()))
            except BaseException:
                atomic_write_text(pool / f"error-{n}.{rank}.txt", traceback.format_exc())
                raise
            atomic_write_text(pool / f"done-{n}.{rank}.json", json.dumps(done))
            n += 1
            continue
        if (pool / "stop").exists() or (parent is not None and os.getppid() != parent):
            return
        time.sleep(POLL_S)


class RankPool:
    """The ranks that answer jobs into the response cache: ``devices`` worker processes on this
    machine, or (``slurm``) the tasks of a SLURM job. A subclass hands over what its ranks run
    (``worker_class``, built from :meth:`_setup`); ``where`` names its config node in errors."""

    where = "model"

    def __init__(
        self, execution: Mapping[str, Any], worker_class: type[RankWorker], slurm: bool = True
    ) -> None:
        self.worker_class = worker_class
        self.execution: dict[str, Any] = {
            "runner": "lightning",
            "devices": int(execution.get("devices", 1)),
            "num_nodes": int(execution.get("num_nodes", 1)),
            "strategy": str(execution.get("strategy", "ddp")),
            "accelerator": str(execution.get("accelerator", "auto")),
            "precision": execution.get("precision"),
        }
        self.stats = ForwardStats()
        self.jobs = 0
        self._first = 0  # jobs before the current pool (each pool numbers its jobs from 1)
        self._procs: list[subprocess.Popen[bytes]] = []
        self._pool: Path | None = None
        self._local: Any = None  # rank 0 in this process (SLURM task 0)
        self._slurm = slurm_rank() if slurm else None
        self.world = int(self.execution["devices"]) * int(self.execution["num_nodes"])
        w = self.where
        if self._slurm is not None and self._slurm[1] != self.world:
            raise BackendError(
                f"lightning runner: {w}.devices x {w}.num_nodes = {self.world}, but SLURM started "
                f"{self._slurm[1]} tasks (set hydra.launcher.tasks_per_node and nodes to match)"
            )
        if self._slurm is None and self.execution["num_nodes"] > 1:
            raise BackendError(
                f"lightning runner: {w}.num_nodes = {self.execution['num_nodes']} needs a SLURM job "
                f"(hydra/launcher=slurm); one machine runs {w}.devices processes"
            )
        atexit.register(self.close)

    def _setup(self) -> dict[str, Any]:
        raise NotImplementedError

    def _start(self) -> Path:
        if self._pool is not None:
            return self._pool
        if self._slurm is not None:
            pool = slurm_pool()
            pool.mkdir(parents=True, exist_ok=True)
            self._local = self.worker_class(self._setup())
            atomic_write_text(pool / "setup.json", json.dumps(self._setup()))
            self._pool = pool
            return pool
        self._first = self.jobs
        _remove_stale_pools()
        pool = Path(tempfile.mkdtemp(prefix=f"{_POOL_PREFIX}{os.getpid()}-"))
        atomic_write_text(pool / "setup.json", json.dumps(self._setup()))
        devices = int(self.execution["devices"])
        threads = str(max(1, _cores() // devices))
        base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        base.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())})
        base.update({"WORLD_SIZE": str(devices), "NODE_RANK": "0", "OMP_NUM_THREADS": threads})
        base["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        for rank in range(devices):
            env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}
            log = open(pool / f"log-{rank}.txt", "wb")  # noqa: SIM115 (the worker keeps it)
            cmd = [sys.executable, "-m", self.worker_class.__module__, str(pool), str(rank)]
            cmd.append(str(os.getpid()))
            self._procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
            log.close()
        self._pool = pool
        return pool

    def _run(self, cache_root: Path, shards: list[dict[str, Any]]) -> None:
        pool = self._start()
        self.jobs += 1
        n = self.jobs - self._first
        atomic_write_text(pool / f"job-{n}.json", json.dumps({"cache": str(cache_root), "shards": shards}))
        if self._local is not None:
            atomic_write_text(
                pool / f"done-{n}.0.json",
                json.dumps(self._local.answer({"cache": str(cache_root), "shards": shards})),
            )
        for rank in range(self.world):
            done = pool / f"done-{n}.{rank}.json"
            while not done.exists():
                if any(pool.glob(f"error-{n}.*.txt")):
                    time.sleep(1.0)  # a rank's failure breaks the others' collectives: report them all
                    texts = [
                        f"rank {e.name.split('.')[1]}: {e.read_text()[-2000:]}"
                        for e in sorted(pool.glob(f"error-{n}.*.txt"))
                    ]
                    raise BackendError("lightning runner: job failed\n" + "\n".join(texts))
                # every rank, not only the awaited one: the others wait for a dead rank forever
                for r, proc in enumerate(self._procs):
                    if proc.poll() is not None:
                        log = (pool / f"log-{r}.txt").read_text(errors="replace")[-3000:]
                        raise BackendError(
                            f"lightning runner: worker rank {r} exited with code {proc.returncode}; "
                            f"its log ends:\n{log}"
                        )
                time.sleep(POLL_S)
            stats = json.loads(done.read_text())["stats"]
            for k, v in stats.items():
                setattr(self.stats, k, getattr(self.stats, k) + int(v))

    def close(self) -> None:
        """Stop the workers and remove the job files (the cache keeps every answer)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        with contextlib.suppress(OSError):
            atomic_write_text(pool / "stop", "")
        for p in self._procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs = []
        if self._slurm is None:
            shutil.rmtree(pool, ignore_errors=True)


def run_rank(worker_class: type[RankWorker], argv: list[str]) -> None:
    """A worker process's life (``python -m <worker module> <pool> <rank> [<parent pid>]``):
    die with the parent, then serve the pool's jobs with ``worker_class``."""
    parent = int(argv[2]) if len(argv) > 2 else None
    if parent is not None:
        _die_with_parent(parent)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    serve(Path(argv[0]), int(argv[1]), parent, worker_class)
