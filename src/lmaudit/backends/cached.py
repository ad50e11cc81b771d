"""Backends seen through the content-addressed cache, with progress bars.

Answers are stored one entry per request (per draw, for sampling) as soon as a batch
returns, so a run killed at any point loses at most the batch in flight, and a restarted
run re-asks only what is missing. Processes sharing the cache claim what they compute
(:meth:`ResponseCache.claim`), so parallel jobs never ask the same request twice. A stored
answer of the wrong shape (:func:`label_value`, :func:`sample_value`) is rejected by the
cache like a damaged entry: reported, counted, asked again and rewritten.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
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
from lmaudit.backends.context import check_context
from lmaudit.progress import NO_ETA, SettledBar
from lmaudit.provenance.cache import ResponseCache, cache_key
from lmaudit.provenance.redact import redact_url


def _number(x: Any, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        raise ValueError(f"{what} is {x!r}, not a finite number")
    return float(x)


def label_value(v: Any) -> LabelResult:
    """A cached label result, or ValueError/TypeError/KeyError when its shape is wrong."""
    if (
        not isinstance(v, dict)
        or not isinstance(v.get("probs"), dict)
        or not isinstance(v.get("top_k"), list)
    ):
        raise TypeError("a label result is an object with 'probs' (object) and 'top_k' (list)")
    for label, p in v["probs"].items():
        if _number(p, f"probs[{label!r}]") < 0:
            raise ValueError(f"probs[{label!r}] is negative")
    _number(v["other"], "other")
    for i, entry in enumerate(v["top_k"]):
        if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str):
            raise TypeError(f"top_k[{i}] is not a [token, probability] pair")
        _number(entry[1], f"top_k[{i}]")
    return LabelResult.from_json(v)


def sample_value(v: Any) -> str:
    """A cached draw (a string), or TypeError."""
    if not isinstance(v, str):
        raise TypeError(f"a draw is a string, not {type(v).__name__}")
    return v


def stream_reports_tokens(backend: Any) -> bool:
    """Whether ``backend.iter_samples`` takes an ``on_tokens`` hook (its ``reports_tokens``)."""
    return bool(getattr(backend, "reports_tokens", False)) and callable(
        getattr(backend, "iter_samples", None)
    )


def _with_cached(res: SampleResult, known: Sequence[str | None]) -> SampleResult:
    """``res`` with the draws the cache already held put back (answered again, not replaced)."""
    texts = [t if t is not None else res.texts[d] for d, t in enumerate(known)]
    refusals = tuple(None if t is not None else res.refusal(d) for d, t in enumerate(known))
    return SampleResult(texts=texts, refusals=refusals if any(refusals) else ())


class CachedBackend:
    def __init__(
        self,
        backend: Any,
        cache: ResponseCache,
        *,
        batch_size: int = 16,
        progress: bool = True,
        poll_s: float = 0.05,
    ):
        self.backend = backend
        self.cache = cache
        self.batch_size = max(1, int(batch_size))
        self.progress = progress
        self.poll_s = poll_s
        self.digest = identity_digest(backend.identity)
        # a backend that checks its server against what this identity's answers were made
        # with (openai: lmaudit.backends.openai.served) does so before any answer is served
        attach = getattr(backend, "attach_cache", None)
        if callable(attach):
            attach(cache.root, self.digest)
        self.reads_meta = bool(getattr(backend, "reads_meta", False))
        # wall seconds spent answering cache misses, per contract (the audit record's timings)
        self.seconds: dict[str, float] = {"label_logprobs": 0.0, "sample": 0.0}
        self._loaded = False  # the backend's model loaded (:meth:`_ready`)
        # draws the server answered without an answer, by finish reason (never cached)
        self.refusals: Counter[str] = Counter()

    def _ready(self) -> None:
        """Load the backend's model (its ``load()``) before the first miss is answered: a step
        of its own, said and timed, so no progress bar counts the load as its first item."""
        load = getattr(self.backend, "load", None)
        if self._loaded or not callable(load):
            return
        self._loaded = True
        t0 = time.perf_counter()
        if self.progress:
            name = str(self.backend.identity.get("model") or "the model").split("@")[0]
            tqdm.write(f"loading {name} ...", file=sys.stderr)
        load()
        self.seconds["load_model"] = time.perf_counter() - t0
        if self.progress:
            tqdm.write(f"loaded in {self.seconds['load_model']:.1f} s", file=sys.stderr)

    def describe(self) -> dict[str, Any]:
        """What the backend says about itself for the audit record (empty if it says nothing)."""
        describe = getattr(self.backend, "describe", None)
        return dict(describe()) if callable(describe) else {}

    def _fill(
        self,
        pending: list[int],
        claim_key: Callable[[int], str],
        load: Callable[[int], bool],
        compute: Callable[[list[int], Callable[[int], None]], None],
        bar: Any,
        weight: Callable[[int], int],
        whole: bool = False,
        grouped: bool = False,
        contract: str = "label_logprobs",
    ) -> None:
        """Compute ``pending`` indices: claim, compute in batches (all at once when ``whole``),
        release each as it is stored; wait for others' claims.

        ``grouped`` claims all of them with one claim file (:meth:`ResponseCache.claim_many`),
        released when the batches are done, for many small requests where a file per request
        would cost more than answering it.

        ``compute(indices, stored)`` calls ``stored(i)`` once index ``i``'s answer is in the cache."""
        while pending:
            mine: list[int] = []
            theirs: list[int] = []
            group: str | None = None
            if grouped:
                group, granted = self.cache.claim_many([claim_key(i) for i in pending])
                for i in pending:
                    if claim_key(i) not in granted:
                        theirs.append(i)
                    elif load(i):  # finished by another process between our miss and our claim
                        bar.update(weight(i))
                    else:
                        mine.append(i)
            else:
                for i in pending:
                    if self.cache.claim(claim_key(i)):
                        if load(i):
                            self.cache.release(claim_key(i))
                            bar.update(weight(i))
                        else:
                            mine.append(i)
                    else:
                        theirs.append(i)

            def stored(i: int) -> None:
                if not grouped:
                    self.cache.release(claim_key(i))
                bar.update(weight(i))

            step = max(1, len(mine)) if whole else self.batch_size
            t0 = time.perf_counter()
            server = self._server()
            if mine and server:  # a bar that stands still says what it waits on
                bar.set_postfix_str(f"waiting on {server}")
            try:
                for s in range(0, len(mine), step):
                    compute(mine[s : s + step], stored)
            finally:
                if mine and server:
                    bar.set_postfix_str("")
                self.seconds[contract] = self.seconds.get(contract, 0.0) + time.perf_counter() - t0
                if grouped:
                    self.cache.release_many(group)
                else:
                    for i in mine:
                        self.cache.release(claim_key(i))
            still: list[int] = []
            if theirs:
                bar.set_postfix_str("waiting on another run's answers (their claims in the cache)")
            for i in theirs:
                while not load(i) and self.cache.claimed(claim_key(i)):
                    time.sleep(self.poll_s)
                if load(i):
                    bar.update(weight(i))
                else:  # the other process gave up or died: try again ourselves
                    still.append(i)
            if theirs:
                bar.set_postfix_str("")
            pending = still

    def _server(self) -> str | None:
        """The server a backend's answers come from (its ``base_url``, credentials masked);
        None for a model in this process."""
        url = getattr(self.backend, "base_url", None)
        return redact_url(str(url)) if url else None

    def _filled_by_backend(
        self,
        fill: Callable[..., None],
        keyed: list[tuple[Any, Any]],
        idx: list[int],
        load: Callable[[int], bool],
        stored: Callable[[int], None],
        *extra: Any,
    ) -> None:
        """Hand a backend whose workers write the cache themselves (its ``fill_*``) the
        ``(key, request)`` pairs of ``idx``, then load each answer it stored."""
        fill(self.cache.root, keyed, *extra)
        for i in idx:
            if not load(i):
                raise RuntimeError(f"the backend did not store an answer for request {i}")
            stored(i)

    def _bar(
        self, total: int, done: int, desc: str, unit: str, *, show: bool | None = None, eta: bool = True
    ) -> SettledBar:
        """A call's bar: ``total`` units, ``done`` of them found in the cache; shown when
        ``show`` (default: ``progress``); with no time left when ``eta`` is off."""
        return SettledBar(
            total=total,
            initial=done,
            desc=desc,
            unit=unit,
            disable=not (self.progress if show is None else show),
            leave=True,
            bar_format=None if eta else NO_ETA,
        )

    def _decoding_bar(self, asked: Sequence[SampleRequest], desc: str, show: bool) -> Any:
        """A bar of the tokens decoded for ``asked``, for a backend that reports them step by
        step (``reports_tokens``: hf) and draws of more than one token; the draws' bar moves only
        when a request's draws are all done, this one within a long draw. Its total is the
        decoding budget, ``n x max_tokens`` per request; a draw that stops early counts the
        budget it did not need as done. None (a null context) for any other backend."""
        if not stream_reports_tokens(self.backend) or not asked:
            return contextlib.nullcontext(None)
        return SettledBar(
            total=sum(r.n * r.max_tokens for r in asked),
            desc=f"{desc}: decoding",
            unit="token",
            leave=False,
            disable=not show or max(r.max_tokens for r in asked) <= 1,
        )

    # -- label log-probabilities ---------------------------------------------------------
    def label_logprobs(
        self, requests: Sequence[LabelRequest], top_k: int, desc: str = "measuring"
    ) -> list[LabelResult]:
        if not isinstance(self.backend, LabelBackend):
            raise TypeError(f"backend {type(self.backend).__name__} has no label log-probability contract")
        check_context(self.backend, requests)  # before the cache or the model is asked
        keys = [cache_key(self.digest, {**r.payload(self.reads_meta), "top_k": top_k}) for r in requests]
        out: list[LabelResult | None] = [None] * len(requests)

        def load(i: int) -> bool:
            hit = self.cache.get(keys[i], label_value)
            if hit is not None:
                out[i] = hit
            return hit is not None

        # A backend that streams results (hf: one prefix trie over all requests) gets every
        # missing request at once and stores each answer as soon as it is ready.
        stream = getattr(self.backend, "iter_label_logprobs", None)
        # A backend whose workers write the cache themselves (the Lightning runner) gets every
        # missing request with its key; the answers are then read back from the cache.
        fill = getattr(self.backend, "fill_labels", None)

        def compute(idx: list[int], stored: Callable[[int], None]) -> None:
            if fill is not None:
                self._filled_by_backend(fill, [(keys[i], requests[i]) for i in idx], idx, load, stored, top_k)
                return
            pairs: Iterable[tuple[int, LabelResult]]
            if stream is not None:
                pairs = ((idx[j], res) for j, res in stream([requests[i] for i in idx], top_k=top_k))
            else:
                results = self.backend.label_logprobs([requests[i] for i in idx], top_k=top_k)
                if len(results) != len(idx):
                    raise RuntimeError("backend returned a different number of results than requests")
                pairs = zip(idx, results, strict=True)
            seen = 0
            for i, res in pairs:
                self.cache.put(keys[i], res.to_json())
                out[i] = res
                stored(i)
                seen += 1
            if seen != len(idx):
                raise RuntimeError("backend returned a different number of results than requests")

        missing = [i for i in range(len(requests)) if not load(i)]
        if missing:
            self._ready()
        whole = stream is not None or fill is not None
        # answered as a whole (a prefix trie), the first prompts carry every shared prefix:
        # a time left extrapolated from them would be wrong by far, so none is shown
        with self._bar(len(requests), len(requests) - len(missing), desc, "prompt", eta=not whole) as bar:
            self._fill(missing, lambda i: keys[i], load, compute, bar, lambda i: 1, whole=whole)
        return [r for r in out if r is not None]

    # -- sampling --------------------------------------------------------------------------
    def sample(
        self, requests: Sequence[SampleRequest], desc: str = "sampling", progress: bool | None = None
    ) -> list[SampleResult]:
        if not isinstance(self.backend, SamplingBackend):
            raise TypeError(f"backend {type(self.backend).__name__} has no sampling contract")
        check_context(self.backend, requests)  # before the cache or the model is asked
        out: list[SampleResult | None] = [None] * len(requests)
        # what changes a draw beyond the identity, for some requests only (hf: the decode block
        # of multi-token draws); part of those requests' keys
        extra = getattr(self.backend, "sample_key_extra", None)

        def payload(r: SampleRequest, d: int) -> dict[str, Any]:
            p = r.payload(self.reads_meta, d)
            more = extra(r) if extra is not None else None
            return {**p, "backend_sampling": more} if more else p

        all_keys = [[cache_key(self.digest, payload(r, d)) for d in range(r.n)] for r in requests]

        # the draws of a request found in the cache when others were not (the rest refused
        # earlier): kept as cached, so a row always shows what the cache holds
        partial: dict[int, list[str | None]] = {}

        def load(i: int) -> bool:
            texts = [self.cache.get(k, sample_value) for k in all_keys[i]]
            if any(t is None for t in texts):
                partial[i] = texts
                return False
            out[i] = SampleResult(texts=[str(t) for t in texts])
            return True

        fill = getattr(self.backend, "fill_samples", None)
        # a backend that yields each request's draws as they are done (hf) has each stored and
        # counted then, not when its whole batch is
        stream = getattr(self.backend, "iter_samples", None)
        show = self.progress if progress is None else progress

        def store(
            idx: list[int], pairs: Iterable[tuple[int, SampleResult]], stored: Callable[[int], None]
        ) -> None:
            """Each ``(index, result)`` into the cache as it comes, counted by ``stored``."""
            seen = 0
            for i, res in pairs:
                seen += 1
                if len(res.texts) != requests[i].n:
                    raise RuntimeError("backend returned a different number of draws than asked")
                # a request's draws go into the cache as one pack (one file, not one per draw);
                # a refused draw never does (asked again by the next run)
                known = partial.get(i) or [None] * len(res.texts)
                answered = [
                    (key, text)
                    for d, (key, text, had) in enumerate(zip(all_keys[i], res.texts, known, strict=True))
                    if had is None and res.refusal(d) is None
                ]
                self.cache.put_many(answered)
                for d in range(requests[i].n):
                    reason = res.refusal(d)
                    if reason is not None and known[d] is None:
                        self.refusals[reason.split(":")[0]] += 1
                if any(t is not None for t in known):
                    res = _with_cached(res, known)
                out[i] = res
                stored(i)
            if seen != len(idx):
                raise RuntimeError("backend returned a different number of results than requests")

        def compute(idx: list[int], stored: Callable[[int], None]) -> None:
            if fill is not None:
                self._filled_by_backend(fill, [(all_keys[i], requests[i]) for i in idx], idx, load, stored)
                return
            asked = [requests[i] for i in idx]
            with self._decoding_bar(asked, desc, show) as tokens:
                pairs: Iterable[tuple[int, SampleResult]]
                if stream is not None:
                    hook = {} if tokens is None else {"on_tokens": tokens.update}
                    pairs = ((idx[j], res) for j, res in stream(asked, **hook))
                else:
                    results = self.backend.sample(asked)
                    if len(results) != len(idx):
                        raise RuntimeError("backend returned a different number of results than requests")
                    pairs = zip(idx, results, strict=True)
                store(idx, pairs, stored)

        missing = [i for i in range(len(requests)) if not load(i)]
        if missing:
            self._ready()
        total = sum(r.n for r in requests)
        with self._bar(total, total - sum(requests[i].n for i in missing), desc, "draw", show=show) as bar:
            # a request's draws are claimed together, under the key of its first draw
            self._fill(
                missing,
                lambda i: all_keys[i][0] if all_keys[i] else "empty",
                load,
                compute,
                bar,
                lambda i: requests[i].n,
                whole=fill is not None,
                contract="sample",
            )
        return [r for r in out if r is not None]
