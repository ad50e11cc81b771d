"""Backends seen through the content-addressed cache, with progress bars.

Answers are stored one entry per request (per draw, for sampling) as soon as a batch
returns, so a run killed at any point loses at most the batch in flight, and a restarted
run re-asks only what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tqdm.auto import tqdm

from lmaudit.backends.base import (
    LabelBackend,
    LabelRequest,
    LabelResult,
    SampleRequest,
    SampleResult,
    SamplingBackend,
    identity_digest,
)
from lmaudit.provenance.cache import ResponseCache, cache_key


class CachedBackend:
    def __init__(self, backend: Any, cache: ResponseCache, *, batch_size: int = 16, progress: bool = True):
        self.backend = backend
        self.cache = cache
        self.batch_size = max(1, int(batch_size))
        self.progress = progress
        self.digest = identity_digest(backend.identity)
        self.reads_meta = bool(getattr(backend, "reads_meta", False))

    # -- label log-probabilities ---------------------------------------------------------
    def label_logprobs(self, requests: Sequence[LabelRequest], top_k: int, desc: str = "measuring") -> list[LabelResult]:
        if not isinstance(self.backend, LabelBackend):
            raise TypeError(f"backend {type(self.backend).__name__} has no label log-probability contract")
        keys = [cache_key(self.digest, {**r.payload(self.reads_meta), "top_k": top_k}) for r in requests]
        out: list[LabelResult | None] = [None] * len(requests)
        missing: list[int] = []
        for i, k in enumerate(keys):
            hit = self.cache.get(k)
            if hit is None:
                missing.append(i)
            else:
                out[i] = LabelResult.from_json(hit)
        bar = tqdm(total=len(requests), initial=len(requests) - len(missing), desc=desc, unit="prompt",
                   disable=not self.progress, leave=False)
        try:
            for s in range(0, len(missing), self.batch_size):
                idx = missing[s : s + self.batch_size]
                results = self.backend.label_logprobs([requests[i] for i in idx], top_k=top_k)
                if len(results) != len(idx):
                    raise RuntimeError("backend returned a different number of results than requests")
                for i, res in zip(idx, results, strict=True):
                    self.cache.put(keys[i], res.to_json())
                    out[i] = res
                bar.update(len(idx))
        finally:
            bar.close()
        return [r for r in out if r is not None]

    # -- sampling --------------------------------------------------------------------------
    def sample(self, requests: Sequence[SampleRequest], desc: str = "sampling",
               progress: bool | None = None) -> list[SampleResult]:
        if not isinstance(self.backend, SamplingBackend):
            raise TypeError(f"backend {type(self.backend).__name__} has no sampling contract")
        out: list[SampleResult | None] = [None] * len(requests)
        all_keys: list[list[str]] = []
        missing: list[int] = []
        for i, r in enumerate(requests):
            keys = [cache_key(self.digest, r.payload(self.reads_meta, d)) for d in range(r.n)]
            all_keys.append(keys)
            texts = [self.cache.get(k) for k in keys]
            if any(t is None for t in texts):
                missing.append(i)
            else:
                out[i] = SampleResult(texts=[str(t) for t in texts])
        total = sum(r.n for r in requests)
        done = total - sum(requests[i].n for i in missing)
        show = self.progress if progress is None else progress
        bar = tqdm(total=total, initial=done, desc=desc, unit="draw", disable=not show, leave=False)
        try:
            for s in range(0, len(missing), self.batch_size):
                idx = missing[s : s + self.batch_size]
                results = self.backend.sample([requests[i] for i in idx])
                for i, res in zip(idx, results, strict=True):
                    if len(res.texts) != requests[i].n:
                        raise RuntimeError("backend returned a different number of draws than asked")
                    for k, t in zip(all_keys[i], res.texts, strict=True):
                        self.cache.put(k, t)
                    out[i] = res
                    bar.update(requests[i].n)
        finally:
            bar.close()
        return [r for r in out if r is not None]
