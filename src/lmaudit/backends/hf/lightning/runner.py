"""``model.runner=lightning``: the ``hf`` backend over many devices and nodes with PyTorch Lightning.

:class:`LightningRunner` stands where :class:`~lmaudit.backends.hf.HFBackend` stands: the same
identity (execution settings never enter it; only a ``-mixed`` precision, which computes under
autocast, adds ``autocast``), the same gate G1 and rendering (the tokenizer is loaded in this
process; the model is not). The cache layer hands it every missing request of a call with its
cache keys (:meth:`fill_labels`, :meth:`fill_samples`); it cuts them into shards and writes one
*job* file, and every rank answers its shards into the response cache
(:mod:`lmaudit.backends.hf.lightning.module`). The caller then reads all answers back from the
cache, so what it returns never depends on which rank computed what, or in which order.

Sharding: label requests are cut into the one-process path's scoring units
(:func:`~lmaudit.backends.hf.packed.trie.scoring_units`: sorted by token ids, of equal trie
size, at most ``unit_tokens``, each unit its own prefix trie), one shard per unit, and each
rank gets a contiguous run of whole units and scores each shard as one unit; a rank computes
each unit with the same chunks and masks as one process does, so the label probabilities agree
with the one-process ones within the determinism contract's 1e-5 (a rank's thread count may
change their last bits); sampling requests are sorted by their first draw's key and dealt round-robin by Lightning's distributed
sampler. Each draw's seed is fixed by its key, so draws do not depend on the rank either.

Processes (docs/scale.md; :mod:`lmaudit.backends.hf.lightning.pool` starts and feeds them):

* on one machine, ``devices`` worker processes (``python -m lmaudit.backends.hf.lightning.runner``)
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

import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmaudit.backends.api import BackendAPI
from lmaudit.backends.base import LabelRequest, LabelResult, Message, SampleRequest, SampleResult
from lmaudit.backends.hf.backend import HFBackend
from lmaudit.backends.hf.lightning.pool import (
    RankPool,
    contiguous_runs,
    interleave,
    run_rank,
    serve,
    set_threads,
    slurm_pool,
    slurm_rank,
)
from lmaudit.backends.hf.packed.trie import scoring_units
from lmaudit.backends.hf.sampling import SAMPLE_GROUP
from lmaudit.errors import BackendError
from lmaudit.provenance.cache import ResponseCache


class Worker:
    """One rank: the model, loaded here, and the jobs it answers."""

    def __init__(self, setup: dict[str, Any]) -> None:
        from lmaudit.backends.hf.lightning.module import HFPredictModule

        self.setup = setup
        set_threads(setup)
        self.backend = HFBackend.from_config({**setup["model"], "progress": False})
        expected = setup.get("identity")
        if expected is not None and self.backend.identity != expected:
            raise BackendError(
                f"hf backend: this rank's model {setup['model'].get('model')!r} is not the one the run "
                "identified (its files changed since); run again once it is no longer being written"
            )
        self.module = HFPredictModule(self.backend, lockstep=setup["strategy"] == "fsdp")

    def answer(self, job: dict[str, Any]) -> dict[str, Any]:
        from lmaudit.backends.hf.lightning.module import CacheWriter, make_trainer, run_job

        before = self.backend.stats.as_dict()
        writer = CacheWriter(job["cache"])
        run_job(make_trainer(self.setup, writer, self.backend.model), self.module, job["shards"])
        after = self.backend.stats.as_dict()
        return {"written": writer.written, "stats": {k: after[k] - before[k] for k in after}}


def serve_if_secondary(model_cfg: Mapping[str, Any]) -> bool:
    """Under SLURM with ``runner=lightning``, tasks other than 0 serve jobs here and return True
    (the caller then does nothing else); task 0 and every other setting return False."""
    if model_cfg.get("backend") != "hf" or model_cfg.get("runner") != "lightning":
        return False
    found = slurm_rank()
    if found is None or found[0] == 0:
        return False
    pool = slurm_pool()
    while not (pool / "setup.json").exists():
        time.sleep(0.2)
    serve(pool, found[0], None, Worker)
    return True


class LightningRunner(RankPool, BackendAPI):
    """The ``hf`` backend run by Lightning across ``devices`` x ``num_nodes`` ranks (module
    docstring); :class:`~lmaudit.backends.hf.backend.HFBackend` declares it as its ``lightning``
    runner. :meth:`close` (the pool's) stops the worker processes."""

    def __init__(self, model_cfg: Mapping[str, Any], execution: Mapping[str, Any]) -> None:
        self.model_cfg = {k: v for k, v in model_cfg.items() if k != "progress"}
        self.hf = HFBackend.from_config({**self.model_cfg, "progress": False})  # tokenizer only
        if self.hf.checkpoint is not None and self.hf.checkpoint.load_revision is not None:
            # every rank loads the commit resolved here, wherever the hub branch is by then
            self.model_cfg["revision"] = self.hf.checkpoint.load_revision
        super().__init__(execution, Worker)

    @classmethod
    def serve_if_secondary(cls, config: Mapping[str, Any]) -> bool:
        """:func:`serve_if_secondary`: a SLURM task other than 0 serves the ranks' jobs."""
        return serve_if_secondary(config)

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

    def context_length(self) -> int | None:
        return self.hf.context_length()

    def prompt_lengths(self, prompts: Sequence[Sequence[Message]]) -> list[int]:
        return self.hf.prompt_lengths(prompts)

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
        """Answer every ``(key, request)`` into the cache under ``cache_root``: one shard per
        scoring unit (the one-process path's units, :func:`scoring_units`), each rank a
        contiguous run of whole units of about equal size."""
        ids = [self.hf.encode(r.messages) for _, r in items]
        units = scoring_units(ids, self.hf.unit_tokens)
        cost = [sum(len(ids[i]) for i in unit) for unit in units]

        def shard(unit: Sequence[int]) -> dict[str, Any]:
            return {
                "kind": "labels",
                "top_k": int(top_k),
                "items": [
                    {
                        "key": items[i][0],
                        "messages": list(items[i][1].messages),
                        "labels": list(items[i][1].labels),
                    }
                    for i in unit
                ],
            }

        runs = [[shard(units[u]) for u in run] for run in contiguous_runs(cost, self.world)]
        self._run(cache_root, interleave(runs, {"kind": "labels", "top_k": int(top_k), "items": []}))

    def fill_samples(self, cache_root: Path, items: Sequence[tuple[list[str], SampleRequest]]) -> None:
        """Answer every ``(draw keys, request)`` into the cache under ``cache_root``."""
        order = sorted(range(len(items)), key=lambda i: items[i][0][0] if items[i][0] else "")

        def item(i: int) -> dict[str, Any]:
            keys, r = items[i]
            params = {"n": r.n, "temperature": r.temperature, "top_p": r.top_p}
            params.update({"max_tokens": r.max_tokens, "seed": r.seed})
            return {"keys": keys, "messages": list(r.messages), "params": params}

        # shards of up to SAMPLE_GROUP requests (a rank's backend reads the vocabulary head once
        # per shard), at least one per rank while there are requests enough; the draws do not
        # depend on the grouping
        count = max(-(-len(order) // SAMPLE_GROUP), min(len(order), self.world))
        size = -(-len(order) // count) if count else 1
        shards = [
            {"kind": "sample", "items": [item(i) for i in order[s : s + size]]}
            for s in range(0, len(order), size)
        ]
        # every rank gets the same number of shards (Lightning's sampler wants at least one per
        # rank; fsdp needs the ranks in step); an empty shard is answered with nothing
        shards += [{"kind": "sample", "items": []}] * (-len(shards) % self.world)
        self._run(cache_root, shards)

    def _setup(self) -> dict[str, Any]:
        # each rank checks that it loads the model this process identified
        return {"model": self.model_cfg, "identity": self.hf.identity, **self.execution}


if __name__ == "__main__":  # a rank on this machine (RankPool starts it)
    run_rank(Worker, sys.argv[1:])
