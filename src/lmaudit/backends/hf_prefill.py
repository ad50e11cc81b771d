"""Prefill for sampling: a prompt's next-token logits and KV cache, computed message by message
and memoised by token prefix.

A chat prompt is cut at its own message boundaries: the token lengths of its first ``k``
messages rendered alone, where those tokens are a prefix of the whole prompt's tokens. Cuts
closer than ``MIN_SEGMENT`` tokens to the previous one are dropped (a forward has a fixed cost;
the system turn of a template that folds it into the first user turn renders to the BOS token
alone). Segment ``j`` runs as one forward over the KV cache of the segments before it.

The cut depends on the prompt only, never on what else is sampled or memoised, so a memo hit
returns exactly the tensors that recomputing the prefix would give: draws stay independent of
batching, of the order of requests and of the runner. Prompts that share leading messages (a
system prompt and exemplars, or a position-2 prompt extending a position-1 prompt) compute
those tokens once. The arithmetic differs from one unsplit forward (the logits agree to float
rounding), so the cut is part of the sampling cache key (:data:`PREFILL_KEY`).

:meth:`PrefillMemo.prefill_many` prefills several prompts and then computes their vocabulary
heads together, block by block of the output embedding (the same one-row products as one
prompt's head, so the same bits): the head is 671 MB for Gemma 3's 262k-token vocabulary, and
read once per prompt it cost about as much as a short prompt's forward.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from lmaudit.backends.base import BackendError
from lmaudit.backends.hf_batching import decoder, vocabulary_logits_each

#: Shortest segment worth its own forward; a cut closer than this to the previous is dropped.
MIN_SEGMENT = 16
#: The sampling cache key's record of how prompts are prefilled (changes with MIN_SEGMENT).
PREFILL_KEY = f"by-message/min{MIN_SEGMENT}"
#: Default memory bound of the memo (KV caches and logits), in bytes.
DEFAULT_MEMO_BYTES = 512 * 2**20

_Key = tuple[tuple[int, ...], tuple[int, ...]]


def message_cuts(
    render: Callable[[int], str],
    encode: Callable[[Sequence[str]], list[list[int]]],
    n_messages: int,
    ids: Sequence[int],
) -> list[int]:
    """Token lengths of a prompt's first ``k`` messages rendered alone (``render(k)``, without the
    generation prompt; ``0 < k < n_messages``), where those tokens are a prefix of the whole
    prompt's ``ids``. A prefix the template refuses to render (BackendError), or that tokenizes
    differently, is not a cut."""
    texts: list[str] = []
    for k in range(1, n_messages):
        try:
            texts.append(render(k))
        except BackendError:
            continue
    return [
        len(head)
        for head in (encode(texts) if texts else [])
        if 0 < len(head) < len(ids) and list(ids[: len(head)]) == head
    ]


def segment_bounds(cuts: Iterable[int], total: int, min_segment: int = MIN_SEGMENT) -> list[int]:
    """The end of each segment of a ``total``-token prompt cut at ``cuts``: ascending, ending
    at ``total``. Cuts outside (0, total) are ignored; a cut fewer than ``min_segment`` tokens
    after the previous kept cut is dropped (the last segment may be shorter)."""
    if total < 1:
        raise ValueError("cannot prefill an empty prompt")
    out: list[int] = []
    prev = 0
    for c in sorted(set(cuts)):
        if 0 < c < total and c - prev >= min_segment:
            out.append(c)
            prev = c
    out.append(total)
    return out


def _nbytes(logits: torch.Tensor | None, cache: Any) -> int:
    size = 0 if logits is None else logits.numel() * logits.element_size()
    for layer in cache.layers:
        for t in (layer.keys, layer.values):
            if isinstance(t, torch.Tensor):
                size += t.numel() * t.element_size()
    return size


class PrefillMemo:
    """Least-recently-used memo of ``(logits, cache)`` per token prefix, bounded in bytes.

    Entries are never mutated: a continuation runs on a copy of its parent's cache, and callers
    that decode from a returned cache must copy it first.
    """

    def __init__(self, max_bytes: int = DEFAULT_MEMO_BYTES) -> None:
        self.max_bytes = int(max_bytes)
        # key: (the prefix's tokens, the segment ends it was computed in); the second part makes a
        # hit exact even for two prompts with equal tokens but different message boundaries
        self._entries: OrderedDict[_Key, tuple[torch.Tensor | None, Any, int]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.forwards = 0
        self.tokens_computed = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def _put(self, key: _Key, logits: torch.Tensor | None, cache: Any) -> None:
        size = _nbytes(logits, cache)
        if key in self._entries:  # a message prefix memoised without logits, now a whole prompt
            self._bytes -= self._entries.pop(key)[2]
        if size > self.max_bytes:
            return
        self._entries[key] = (logits, cache, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, (_, _, old) = self._entries.popitem(last=False)
            self._bytes -= old

    def prefill(self, model: Any, ids: Sequence[int], bounds: Sequence[int]) -> tuple[torch.Tensor, Any]:
        """Next-token logits ``[V]`` after ``ids`` and its KV cache (do not mutate either),
        computing ``ids`` in the segments ending at ``bounds`` (:func:`segment_bounds`)."""
        return self.prefill_many(model, [(ids, bounds)])[0]

    @torch.inference_mode()
    def prefill_many(
        self, model: Any, prompts: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[tuple[torch.Tensor, Any]]:
        """:meth:`prefill` of each ``(ids, bounds)``, with the same tensors as one call each
        would give: the decoder segments run prompt by prompt, as there; the vocabulary heads
        of the prompts not memoised with logits run after them, together
        (:func:`~lmaudit.backends.hf_batching.vocabulary_logits_each`, the same products
        reading the output embedding once). A prompt that appears twice is computed once."""
        for ids, bounds in prompts:
            if not bounds or bounds[-1] != len(ids):
                raise ValueError(f"segment bounds {list(bounds)} do not end at the prompt length {len(ids)}")
        device = next(model.parameters()).device
        done: list[tuple[torch.Tensor, Any] | None] = [None] * len(prompts)
        # prompts whose logits are still to come: final key -> (last hidden state, cache, indices)
        heads: dict[_Key, tuple[torch.Tensor, Any, list[int]]] = {}
        for j, (ids, bounds) in enumerate(prompts):

            def key(k: int, ids: Sequence[int] = ids, bounds: Sequence[int] = bounds) -> _Key:
                return tuple(ids[: bounds[k]]), tuple(bounds[: k + 1])

            last = len(bounds) - 1
            if key(last) in heads:  # the same prompt earlier in this call
                self.hits += 1
                heads[key(last)][2].append(j)
                continue
            start, cache = 0, None
            for k in range(last, -1, -1):
                hit = self._entries.get(key(k))
                if hit is not None and (hit[0] is not None or k < last):
                    self._entries.move_to_end(key(k))
                    self.hits += 1
                    if k == last and hit[0] is not None:
                        done[j] = (hit[0], hit[1])
                    cache = hit[1]
                    start = k + 1
                    break
            prev = bounds[start - 1] if start else 0
            for k in range(start, len(bounds)):
                b = bounds[k]
                out = decoder(model)(
                    input_ids=torch.tensor([list(ids[prev:b])], device=device),
                    position_ids=torch.arange(prev, b, device=device).unsqueeze(0),
                    cache_position=torch.arange(prev, b, device=device),
                    past_key_values=copy.deepcopy(cache) if cache is not None else None,
                    use_cache=True,
                )
                cache = out.past_key_values
                self.forwards += 1
                self.tokens_computed += b - prev
                # memoised at once (without logits: a later prompt of this call may continue it)
                self._put(key(k), None, cache)
                if k == last:  # the vocabulary head (a read of the whole output embedding) below;
                    # a copy of the last row, so the segment's hidden states are not held meanwhile
                    heads[key(k)] = (out.last_hidden_state[0, -1:, :].clone(), cache, [j])
                prev = b
        if heads:
            pending = list(heads.items())
            logits = vocabulary_logits_each(model, [hidden for _, (hidden, _, _) in pending])
            for (final, (_, cache, idx)), row in zip(pending, logits, strict=True):
                self._put(final, row[0], cache)
                for j in idx:
                    done[j] = (row[0], cache)
        assert all(d is not None for d in done)  # each prompt is hit with logits or computed
        return [d for d in done if d is not None]
