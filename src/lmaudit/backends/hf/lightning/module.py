"""The ``hf`` backend as a PyTorch Lightning module, for :mod:`lmaudit.backends.hf.lightning.runner`.

A job is one call of the cache layer (every missing request of a ``label_logprobs`` or
``sample`` call, each with its cache key or keys), cut into shards by the runner. The shards
are the items of a dataset that Lightning spreads over the ranks with its distributed sampler;
:meth:`HFPredictModule.predict_step` answers one shard with the backend's own engine (the packed
prefix-trie scoring of :mod:`lmaudit.backends.hf.packed.forward`, the seeded draws of
:mod:`lmaudit.backends.hf.sampling`), and :class:`CacheWriter` stores each answer under its key
in the response cache (atomic writes), so no answer passes between ranks and their order never
matters.

With ``strategy=fsdp`` every forward gathers parameter shards from all ranks, so the ranks must
run the same number of forwards: each rank gets the same number of shards (padded with empty
ones), and after its own work in a step a rank runs one-token forwards until every rank is done
(:class:`Lockstep`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import BasePredictionWriter
from torch.utils.data import DataLoader, Dataset

from lmaudit.backends.base import LabelRequest, SampleRequest
from lmaudit.backends.hf.backend import HFBackend
from lmaudit.provenance.cache import ResponseCache

Answer = tuple[str, Any]  # (cache key, stored value)


class Shards(Dataset[dict[str, Any]]):
    """A job's shards, in the runner's order."""

    def __init__(self, shards: Sequence[dict[str, Any]]) -> None:
        self.shards = list(shards)

    def __len__(self) -> int:
        return len(self.shards)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.shards[i]


def _one(batch: list[dict[str, Any]]) -> dict[str, Any]:
    return batch[0]


class Lockstep:
    """Keeps the ranks' forwards in step (FSDP): before each forward a rank says whether it
    has work; a rank without work runs a one-token forward while any other rank has some."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.idle = False
        model.register_forward_pre_hook(self._before)

    def _round(self, busy: bool) -> bool:
        flag = torch.tensor([1.0 if busy else 0.0], device=next(self.model.parameters()).device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        return bool(flag.item() > 0)

    def _before(self, module: Any, args: Any) -> None:
        if not self.idle:
            self._round(True)

    @torch.inference_mode()
    def drain(self) -> None:
        """Run filler forwards until no rank has work left in this step."""
        self.idle = True
        try:
            device = next(self.model.parameters()).device
            while self._round(False):
                self.model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=device), logits_to_keep=1)
        finally:
            self.idle = False


class HFPredictModule(pl.LightningModule):
    """The causal LM of an :class:`HFBackend`; ``predict_step`` answers one shard."""

    def __init__(self, backend: HFBackend, lockstep: bool = False) -> None:
        super().__init__()
        self.backend = backend
        self.lm = backend.model  # a submodule, so the strategy places it on the rank's device
        self.lockstep = Lockstep(self.lm) if lockstep else None

    def predict_step(self, batch: dict[str, Any], batch_idx: int = 0) -> list[Answer]:
        out: list[Answer] = []
        if batch["kind"] == "labels" and batch["items"]:
            requests = [LabelRequest(tuple(it["messages"]), tuple(it["labels"])) for it in batch["items"]]
            # a shard is one scoring unit of the caller's call (lightning_runner.fill_labels)
            results = self.backend.label_logprobs(requests, top_k=int(batch["top_k"]), one_unit=True)
            out = [(it["key"], r.to_json()) for it, r in zip(batch["items"], results, strict=True)]
        elif batch["kind"] == "sample" and batch["items"]:
            # in one call: the backend reads the vocabulary head once per group of prompts (the
            # draws are those of one call per request)
            reqs = [SampleRequest(messages=tuple(it["messages"]), **it["params"]) for it in batch["items"]]
            for it, res in zip(batch["items"], self.backend.sample(reqs), strict=True):
                out.extend(zip(it["keys"], res.texts, strict=True))
        if self.lockstep is not None:
            self.lockstep.drain()
        return out


class CacheWriter(BasePredictionWriter):
    """Stores each rank's answers in the response cache as each shard finishes."""

    def __init__(self, cache_root: str | Path) -> None:
        super().__init__(write_interval="batch")
        self.cache = ResponseCache(Path(cache_root))
        self.written = 0

    def write_on_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        prediction: Any,
        batch_indices: Sequence[int] | None,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        # one pack per batch (a file per answer costs more than many embeddings)
        self.cache.put_many(list(prediction))
        self.written += len(prediction)


def make_trainer(setup: dict[str, Any], writer: CacheWriter, model: Any) -> pl.Trainer:
    """A predict-only Trainer for the runner's execution settings."""
    strategy: Any = setup["strategy"]
    if strategy == "fsdp":
        from pytorch_lightning.strategies import FSDPStrategy

        # one FSDP unit per decoder layer (transformers names them *DecoderLayer)
        layers = {type(m) for m in model.modules() if type(m).__name__.endswith("DecoderLayer")}
        strategy = FSDPStrategy(auto_wrap_policy=layers or None)
    precision = setup.get("precision")
    return pl.Trainer(
        accelerator=setup["accelerator"],
        devices=int(setup["devices"]),
        num_nodes=int(setup["num_nodes"]),
        strategy=strategy,
        precision=precision,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[writer],
        use_distributed_sampler=True,
    )


def run_job(trainer: pl.Trainer, module: pl.LightningModule, shards: Sequence[dict[str, Any]]) -> None:
    """Answer one job: this rank's shards (chosen by the distributed sampler) into the cache."""
    loader = DataLoader(Shards(shards), batch_size=1, shuffle=False, collate_fn=_one, num_workers=0)
    trainer.predict(module, dataloaders=loader, return_predictions=False)
