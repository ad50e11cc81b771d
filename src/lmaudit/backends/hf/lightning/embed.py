"""``study.embedder.runner=lightning``: the MiniLM embedder over ``devices`` Lightning ranks.

:class:`LightningEmbedder` stands where
:class:`~lmaudit.backends.embed.st.SentenceTransformerEmbedder` stands, with the same identity
(``runner``, ``devices`` and ``accelerator`` never enter it, so neither the cache keys nor the
plan change). :class:`~lmaudit.backends.embed.cached.CachedEmbedder` hands it every text missing
from the cache with its key (:meth:`LightningEmbedder.fill_embeddings`); the keys are computed
in the caller only. The texts are ordered as the in-process path orders them (longest first,
then by text), cut into batches of ``batch_size`` and dealt to the ranks as contiguous runs of
whole batches of about equal padded length; every rank embeds its batches
(:meth:`EmbedPredictModule.predict_step`) and stores each vector through
:func:`~lmaudit.backends.embed.base.vector_entries`, the helper the in-process path writes
with, via the shared :class:`~lmaudit.backends.hf.lightning.module.CacheWriter`. The caller reads
every vector back from the cache, so the rank order never matters. The batches are the
in-process path's batches, so each text is embedded in the same company (the same padding).

The ranks are worker processes on the machine running the pipeline
(:class:`~lmaudit.backends.hf.lightning.pool.RankPool`, never SLURM tasks: MiniLM is small).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
from numpy.typing import NDArray

from lmaudit.backends.api import BackendAPI
from lmaudit.backends.embed.base import decode_vector, vector_entries
from lmaudit.backends.hf.lightning.pool import RankPool, contiguous_runs, interleave, run_rank, set_threads
from lmaudit.errors import BackendError
from lmaudit.provenance.cache import ResponseCache

Answer = tuple[str, Any]  # (cache key, stored entry)


def order_texts(texts: Sequence[str]) -> list[int]:
    """Indices of ``texts`` longest first, then by text (the in-process embedding order)."""
    return sorted(range(len(texts)), key=lambda i: (-len(texts[i]), texts[i]))


def deal(texts: Sequence[str], batch_size: int, world: int) -> list[list[list[int]]]:
    """Per rank, its contiguous run of batches (index lists into ``texts``): the texts in
    :func:`order_texts` order, cut into batches of ``batch_size``, and the batches cut into
    ``world`` runs of about equal padded length (batch size x its longest text)."""
    order = order_texts(texts)
    batches = [order[s : s + batch_size] for s in range(0, len(order), batch_size)]
    cost = [len(b) * max(len(texts[i]) for i in b) + 1 for b in batches]
    return [[batches[j] for j in run] for run in contiguous_runs(cost, world)]


class EmbedPredictModule(pl.LightningModule):
    """The sentence-transformers model of an embedder; ``predict_step`` embeds one batch."""

    def __init__(self, embedder: Any) -> None:
        super().__init__()
        self.embedder = embedder
        self.st = embedder._load()  # a submodule, so the strategy places it on the rank's device

    def predict_step(self, batch: dict[str, Any], batch_idx: int = 0) -> list[Answer]:
        items = batch["items"]
        if not items:
            return []
        texts = [it["text"] for it in items]
        where = f"sentence-transformers {self.embedder.name}"
        _, entries = vector_entries(self.embedder.embed(texts), len(texts), where)
        return [(it["key"], e) for it, e in zip(items, entries, strict=True)]


class EmbedWorker:
    """One rank: the embedder, loaded here, and the jobs it answers."""

    def __init__(self, setup: dict[str, Any]) -> None:
        from lmaudit.backends.registry import build_embedder

        set_threads(setup)
        self.setup = {**setup, "num_nodes": 1, "strategy": "ddp", "precision": None}
        self.module = EmbedPredictModule(build_embedder(setup["embedder"]))

    def answer(self, job: dict[str, Any]) -> dict[str, Any]:
        from lmaudit.backends.hf.lightning.module import CacheWriter, make_trainer, run_job

        writer = CacheWriter(job["cache"])
        run_job(make_trainer(self.setup, writer, self.module.st), self.module, job["shards"])
        return {"written": writer.written, "stats": {}}


class LightningEmbedder(RankPool, BackendAPI):
    """The MiniLM embedder run by Lightning across ``devices`` ranks (module docstring); the
    MiniLM embedder declares it as its ``lightning`` runner."""

    where = "study.embedder"

    def __init__(self, embedder_cfg: Mapping[str, Any], execution: Mapping[str, Any]) -> None:
        from lmaudit.backends.registry import build_embedder

        self.embedder_cfg = dict(embedder_cfg)  # without the execution fields
        self.inner = build_embedder(self.embedder_cfg)  # its identity; the model loads in the ranks
        self.batch_size = int(self.embedder_cfg.get("batch_size", 64))
        super().__init__({**execution, "num_nodes": 1}, EmbedWorker, slurm=False)

    @property
    def identity(self) -> dict[str, Any]:
        return dict(self.inner.identity)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def describe(self) -> dict[str, Any]:
        keep = ("runner", "devices", "accelerator")
        return {
            "identity": self.identity,
            "runner": {**{k: self.execution[k] for k in keep}, "jobs": self.jobs},
        }

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """The embedding contract without a cache of the caller's (through a scratch one)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with tempfile.TemporaryDirectory(prefix="lmaudit-runner-cache-") as tmp:
            cache = ResponseCache(Path(tmp))
            unique = list(dict.fromkeys(texts))
            keys = {t: f"{i:064x}" for i, t in enumerate(unique)}
            self.fill_embeddings(cache.root, [(keys[t], t) for t in unique])
            rows: dict[str, NDArray[np.float32]] = {}
            for t in unique:
                v = decode_vector(cache.get(keys[t]))
                if v is None:
                    raise BackendError(f"lightning runner: no embedding for {t[:60]!r} after the job")
                rows[t] = v
        return np.stack([rows[t] for t in texts]).astype(np.float32)

    def fill_embeddings(self, cache_root: Path, items: Sequence[tuple[str, str]]) -> None:
        """Embed every ``(key, text)`` into the cache under ``cache_root``."""
        if not items:
            return
        runs = deal([t for _, t in items], self.batch_size, self.world)
        per_rank = [
            [{"items": [{"key": items[i][0], "text": items[i][1]} for i in b]} for b in run] for run in runs
        ]
        self._run(cache_root, interleave(per_rank, {"items": []}))

    def _setup(self) -> dict[str, Any]:
        return {"embedder": self.embedder_cfg, **self.execution}


if __name__ == "__main__":  # a rank on this machine (RankPool starts it)
    run_rank(EmbedWorker, sys.argv[1:])
