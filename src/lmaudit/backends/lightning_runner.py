"""``model.runner=lightning``: the ``hf`` backend over many devices and nodes with PyTorch Lightning.

:class:`LightningRunner` stands where :class:`~lmaudit.backends.hf.HFBackend` stands: the same
identity (execution settings never enter it; only a ``-mixed`` precision, which computes under
autocast, adds ``autocast``), the same gate G1 and rendering (the tokenizer is loaded in this
process; the model is not). The cache layer hands it every missing request of a call with its
cache keys (:meth:`fill_labels`, :meth:`fill_samples`); it cuts them into shards and writes one
*job* file, and every rank answers its shards into the response cache
(:mod:`lmaudit.backends.lightning_module`). The caller then reads all answers back from the
cache, so what it returns never depends on which rank computed what, or in which order.

Sharding: label requests are sorted by their token ids and cut into one contiguous run per
rank, so the prompts that share prefixes are scored in one prefix trie on one rank; sampling
requests are sorted by their first draw's key and dealt round-robin by Lightning's distributed
sampler. Each draw's seed is fixed by its key, so draws do not depend on the rank either.

Processes (docs/scale.md):

* on one machine, ``devices`` worker processes (``python -m lmaudit.backends.lightning_runner``)
  are started on first use and kept for the run; each loads the model itself (the embedded
  model's conversion is cached on disk and locked, so it happens once) and joins a process group
  through Lightning's own environment (``LOCAL_RANK``, ``MASTER_ADDR`` ..., as torchrun would set
  them), so Lightning launches nothing itself. Starting the workers as plain subprocesses keeps
  Lightning's launcher away from the Hydra job and the test runner, and a worker that dies is
  reported with its log. On CPU each worker gets ``cores // devices`` torch threads.
* under SLURM (``hydra/launcher=slurm``: ``nodes = num_nodes``, ``tasks_per_node = devices``),
  every task runs ``run.py``; Lightning's SLURM environment gives each its rank. Task 0 runs the
  pipeline and is rank 0 of every job in-process; the others only serve jobs
  (:func:`serve_if_secondary`) until task 0 is done.

A killed run leaves every answer written so far in the cache; the rerun asks only for the rest.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmaudit.backends.base import BackendError, LabelRequest, LabelResult, SampleRequest, SampleResult
from lmaudit.backends.hf import HFBackend
from lmaudit.backends.hf_batching import ForwardStats
from lmaudit.provenance.cache import ResponseCache
from lmaudit.provenance.io import atomic_write_text

POLL_S = 0.02


def _slurm_rank() -> tuple[int, int] | None:
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _slurm_pool(model_cfg: Mapping[str, Any]) -> Path:
    base = Path(os.environ.get("LMAUDIT_RUNNER_DIR") or Path.home() / ".cache" / "lmaudit" / "runner")
    step = os.environ.get("SLURM_STEP_ID", "0")
    return base / f"slurm-{os.environ.get('SLURM_JOB_ID', 'job')}-{step}"


class Worker:
    """One rank: the model, loaded here, and the jobs it answers."""

    def __init__(self, setup: dict[str, Any]) -> None:
        import torch

        from lmaudit.backends.lightning_module import HFPredictModule

        self.setup = setup
        if setup["accelerator"] == "cpu" or not torch.cuda.is_available():
            torch.set_num_threads(max(1, _cores() // int(setup["devices"])))
        self.backend = HFBackend.from_config({**setup["model"], "progress": False})
        self.module = HFPredictModule(self.backend, lockstep=setup["strategy"] == "fsdp")

    def answer(self, job: dict[str, Any]) -> dict[str, Any]:
        from lmaudit.backends.lightning_module import CacheWriter, make_trainer, run_job

        before = self.backend.stats.as_dict()
        writer = CacheWriter(job["cache"])
        run_job(make_trainer(self.setup, writer, self.backend.model), self.module, job["shards"])
        after = self.backend.stats.as_dict()
        return {"written": writer.written, "stats": {k: after[k] - before[k] for k in after}}


def serve(pool: Path, rank: int, parent: int | None) -> None:
    """Answer the pool's jobs in order until it is stopped (or the parent process is gone)."""
    worker = Worker(json.loads((pool / "setup.json").read_text()))
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


def serve_if_secondary(model_cfg: Mapping[str, Any]) -> bool:
    """Under SLURM with ``runner=lightning``, tasks other than 0 serve jobs here and return True
    (the caller then does nothing else); task 0 and every other setting return False."""
    if model_cfg.get("backend") != "hf" or model_cfg.get("runner") != "lightning":
        return False
    found = _slurm_rank()
    if found is None or found[0] == 0:
        return False
    pool = _slurm_pool(model_cfg)
    while not (pool / "setup.json").exists():
        time.sleep(0.2)
    serve(pool, found[0], None)
    return True


class LightningRunner:
    """The ``hf`` backend run by Lightning across ``devices`` x ``num_nodes`` ranks (module docstring)."""

    reads_meta = False

    def __init__(self, model_cfg: Mapping[str, Any], execution: Mapping[str, Any]) -> None:
        self.model_cfg = {k: v for k, v in model_cfg.items() if k != "progress"}
        self.execution: dict[str, Any] = {
            "runner": "lightning",
            "devices": int(execution.get("devices", 1)),
            "num_nodes": int(execution.get("num_nodes", 1)),
            "strategy": str(execution.get("strategy", "ddp")),
            "accelerator": str(execution.get("accelerator", "auto")),
            "precision": execution.get("precision"),
        }
        self.hf = HFBackend.from_config({**self.model_cfg, "progress": False})  # tokenizer only
        self.stats = ForwardStats()
        self.jobs = 0
        self._procs: list[subprocess.Popen[bytes]] = []
        self._pool: Path | None = None
        self._local: Worker | None = None  # rank 0 in this process (SLURM task 0)
        self._slurm = _slurm_rank()
        self.world = int(self.execution["devices"]) * int(self.execution["num_nodes"])
        if self._slurm is not None and self._slurm[1] != self.world:
            raise BackendError(
                f"lightning runner: model.devices x model.num_nodes = {self.world}, but SLURM started "
                f"{self._slurm[1]} tasks (set hydra.launcher.tasks_per_node and nodes to match)"
            )
        if self._slurm is None and self.execution["num_nodes"] > 1:
            raise BackendError(
                f"lightning runner: model.num_nodes = {self.execution['num_nodes']} needs a SLURM job "
                "(hydra/launcher=slurm); one machine runs model.devices processes"
            )
        atexit.register(self.close)

    # -- what the backend is ----------------------------------------------------------------
    @property
    def identity(self) -> dict[str, Any]:
        ident = dict(self.hf.identity)
        precision = self.execution["precision"]
        if precision is not None and str(precision).endswith("-mixed"):
            ident["autocast"] = precision  # computes in another arithmetic than model.dtype
        return ident

    def describe(self) -> dict[str, Any]:
        out = self.hf.describe()
        out["identity"] = self.identity
        out["runner"] = {**self.execution, "jobs": self.jobs, "slurm": self._slurm is not None}
        out["stats"] = self.stats.as_dict()
        return out

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        return self.hf.check_single_token(request)

    def sample_key_extra(self, request: SampleRequest) -> dict[str, Any] | None:
        return self.hf.sample_key_extra(request)

    # -- the contracts, without a cache of the caller's (through a scratch one) -----------------
    def label_logprobs(self, requests: list[LabelRequest], top_k: int | None = None) -> list[LabelResult]:
        from lmaudit.backends.cached import label_value

        k = self.hf.top_k if top_k is None else int(top_k)
        with tempfile.TemporaryDirectory(prefix="lmaudit-runner-cache-") as tmp:
            cache = ResponseCache(Path(tmp))
            keys = [f"{i:064x}" for i in range(len(requests))]
            self.fill_labels(cache.root, list(zip(keys, requests, strict=True)), k)
            return [label_value(cache.get(key)) for key in keys]

    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        with tempfile.TemporaryDirectory(prefix="lmaudit-runner-cache-") as tmp:
            cache = ResponseCache(Path(tmp))
            keys = [[f"{i:032x}{d:032x}" for d in range(r.n)] for i, r in enumerate(requests)]
            self.fill_samples(cache.root, list(zip(keys, requests, strict=True)))
            return [SampleResult(texts=[str(cache.get(k)) for k in ks]) for ks in keys]

    # -- filling the cache ------------------------------------------------------------------
    def fill_labels(self, cache_root: Path, items: Sequence[tuple[str, LabelRequest]], top_k: int) -> None:
        """Answer every ``(key, request)`` into the cache under ``cache_root``."""
        ids = [self.hf.encode(r.messages) for _, r in items]
        order = sorted(range(len(items)), key=lambda i: ids[i])
        per = -(-len(order) // self.world) if order else 0
        shards = [
            {
                "kind": "labels",
                "top_k": int(top_k),
                "items": [
                    {
                        "key": items[i][0],
                        "messages": list(items[i][1].messages),
                        "labels": list(items[i][1].labels),
                    }
                    for i in order[r * per : (r + 1) * per]
                ],
            }
            for r in range(self.world)
        ]
        self._run(cache_root, shards)

    def fill_samples(self, cache_root: Path, items: Sequence[tuple[list[str], SampleRequest]]) -> None:
        """Answer every ``(draw keys, request)`` into the cache under ``cache_root``."""
        order = sorted(range(len(items)), key=lambda i: items[i][0][0] if items[i][0] else "")
        shards: list[dict[str, Any]] = []
        for i in order:
            keys, r = items[i]
            params = {"n": r.n, "temperature": r.temperature, "top_p": r.top_p}
            params.update({"max_tokens": r.max_tokens, "seed": r.seed})
            item = {"keys": keys, "messages": list(r.messages), "params": params}
            shards.append({"kind": "sample", "items": [item]})
        # every rank gets the same number of shards (Lightning's sampler wants at least one per
        # rank; fsdp needs the ranks in step); an empty shard is answered with nothing
        shards += [{"kind": "sample", "items": []}] * (-len(shards) % self.world)
        self._run(cache_root, shards)

    def _setup(self) -> dict[str, Any]:
        return {"model": self.model_cfg, **self.execution}

    def _start(self) -> Path:
        if self._pool is not None:
            return self._pool
        if self._slurm is not None:
            pool = _slurm_pool(self.model_cfg)
            pool.mkdir(parents=True, exist_ok=True)
            self._local = Worker(self._setup())
            atomic_write_text(pool / "setup.json", json.dumps(self._setup()))
            self._pool = pool
            return pool
        pool = Path(tempfile.mkdtemp(prefix="lmaudit-runner-"))
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
            cmd = [
                sys.executable,
                "-m",
                "lmaudit.backends.lightning_runner",
                str(pool),
                str(rank),
                str(os.getpid()),
            ]
            self._procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
            log.close()
        self._pool = pool
        return pool

    def _run(self, cache_root: Path, shards: list[dict[str, Any]]) -> None:
        pool = self._start()
        self.jobs += 1
        n = self.jobs
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
                if rank < len(self._procs) and self._procs[rank].poll() is not None:
                    log = (pool / f"log-{rank}.txt").read_text(errors="replace")[-3000:]
                    raise BackendError(
                        f"lightning runner: worker rank {rank} exited with code "
                        f"{self._procs[rank].returncode}; its log ends:\n{log}"
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


def main(argv: list[str]) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    serve(Path(argv[0]), int(argv[1]), int(argv[2]) if len(argv) > 2 else None)


if __name__ == "__main__":
    main(sys.argv[1:])
