"""Prefill for sampling: a prompt's next-token logits and KV cache, computed message by message
and memoised by token prefix.

A chat prompt is cut at its own message boundaries: the token lengths of its first ``k``
messages rendered alone, where those tokens are a prefix of the whole prompt's tokens; before
an assistant turn, after the opening the generation prompt renders (``<start_of_turn>model``),
so that a prompt ending in the generation prompt is a segment of the conversation that goes
on from it (a position-2 prompt extends its position-1 prompt by the answer and the next
question, and computes only those). Cuts
closer than ``MIN_SEGMENT`` tokens to the previous one are dropped (a forward has a fixed cost;
the system turn of a template that folds it into the first user turn renders to the BOS token
alone). Segment ``j`` is computed as one forward of its own over the KV cache of the segments
before it.

The cut depends on the prompt only, never on what else is sampled or memoised, so a memo hit
returns exactly the tensors that recomputing the prefix would give: draws stay independent of
batching, of the order of requests and of the runner. Prompts that share leading messages (a
system prompt and exemplars, or a position-2 prompt extending a position-1 prompt) compute
those tokens once. The arithmetic differs from one unsplit forward (the logits agree to float
rounding), so the cut is part of the sampling cache key (:data:`PREFILL_KEY`).

:meth:`PrefillMemo.prefill_many` prefills several prompts at once: each segment not memoised
is computed once, in a forward of its own over its parent's cache, after the segment it
continues; then each prompt's vocabulary head runs on its own last hidden row
(:func:`~lmaudit.backends.hf.heads.vocabulary_logits`), so a prompt's logits are those of its
own prefill whatever else is sampled with it.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lmaudit.backends.hf.heads import vocabulary_logits
from lmaudit.backends.hf.packed.forward import decoder
from lmaudit.errors import BackendError

#: Shortest segment worth its own forward; a cut closer than this to the previous is dropped.
MIN_SEGMENT = 16
#: The sampling cache key's record of how prompts are prefilled (changes with MIN_SEGMENT and
#: with where the cuts fall; ``/tf5``: computed by transformers' own model, each segment in a
#: forward of its own and each prompt's head on its own row).
PREFILL_KEY = f"by-message/header/min{MIN_SEGMENT}/tf5"
#: Default memory bound of the memo (KV caches and logits), in bytes.
DEFAULT_MEMO_BYTES = 512 * 2**20

_Key = tuple[tuple[int, ...], tuple[int, ...]]


def message_cuts(
    messages: Sequence[Mapping[str, Any]],
    render: Callable[..., str],
    encode: Callable[[Sequence[str]], list[list[int]]],
    ids: Sequence[int],
) -> list[int]:
    """Where the prompt ``ids`` of ``messages`` may be cut before its message ``k``
    (``0 < k < len(messages)``): the token length of its first ``k`` messages rendered alone
    (``render(messages[:k], generation_prompt=False)``), where those tokens are a prefix of
    ``ids``. Before an assistant turn, the cut is after the opening the generation prompt
    renders, where that is a prefix (``generation_prompt=True``), so that the prompt that
    ended there (a position-1 prompt, say) is a segment of this one. A prefix the template
    refuses to render (BackendError), or that tokenizes differently, is not a cut."""
    texts: list[str] = []
    owners: list[int] = []
    for k in range(1, len(messages)):
        for header in (True, False) if messages[k].get("role") == "assistant" else (False,):
            try:
                texts.append(render(messages[:k], generation_prompt=header))
            except BackendError:
                continue
            owners.append(k)
    cuts: dict[int, int] = {}
    for k, head in zip(owners, encode(texts) if texts else [], strict=True):
        if k not in cuts and 0 < len(head) < len(ids) and list(ids[: len(head)]) == head:
            cuts[k] = len(head)
    return [cuts[k] for k in sorted(cuts)]


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
        self.segments = 0
        self.tokens_computed = 0  # every token a forward ran

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
        would give. The segments not memoised are computed once each, in a forward of their own
        after the segment they continue; then the vocabulary head of each prompt not memoised
        with logits runs on its own last hidden row
        (:func:`~lmaudit.backends.hf.heads.vocabulary_logits`). A prompt that appears twice is
        computed once."""
        for ids, bounds in prompts:
            if not bounds or bounds[-1] != len(ids):
                raise ValueError(f"segment bounds {list(bounds)} do not end at the prompt length {len(ids)}")
        done: list[tuple[torch.Tensor, Any] | None] = [None] * len(prompts)
        plan: list[_Planned] = []
        planned: dict[_Key, int] = {}
        heads: dict[_Key, list[int]] = {}  # prompts whose logits are still to come, by final key
        for j, (ids, bounds) in enumerate(prompts):

            def key(k: int, ids: Sequence[int] = ids, bounds: Sequence[int] = bounds) -> _Key:
                return tuple(ids[: bounds[k]]), tuple(bounds[: k + 1])

            last = len(bounds) - 1
            if key(last) in heads:  # the same prompt earlier in this call
                self.hits += 1
                heads[key(last)].append(j)
                continue
            start, parent = 0, None
            for k in range(last, -1, -1):
                if key(k) in planned:  # a segment of an earlier prompt of this call
                    self.hits += 1
                    start, parent = k + 1, planned[key(k)]
                    break
                hit = self._entries.get(key(k))
                if hit is not None and (hit[0] is not None or k < last):
                    self._entries.move_to_end(key(k))
                    self.hits += 1
                    if k == last and hit[0] is not None:
                        done[j] = (hit[0], hit[1])
                    start, parent = k + 1, hit[1]
                    break
            if done[j] is not None:
                continue
            if start > last:  # the whole prompt is a segment this call computes anyway
                plan[planned[key(last)]].head = True
                heads[key(last)] = [j]
                continue
            prev = bounds[start - 1] if start else 0
            for k in range(start, len(bounds)):
                planned[key(k)] = len(plan)
                if isinstance(parent, int):
                    plan[parent].children += 1
                plan.append(_Planned(key(k), ids[prev : bounds[k]], prev, parent, head=k == last))
                parent, prev = len(plan) - 1, bounds[k]
            heads[key(last)] = [j]
        self._compute(model, plan)
        if heads:
            pending = [plan[planned[final]] for final in heads]
            hiddens = [p.hidden for p in pending]
            assert all(h is not None for h in hiddens)  # every prompt's last segment was computed
            for (final, idx), seg, hidden in zip(heads.items(), pending, hiddens, strict=True):
                assert hidden is not None
                row = vocabulary_logits(model, hidden)[0]
                self._put(final, row, seg.cache)
                for j in idx:
                    done[j] = (row, seg.cache)
        assert all(d is not None for d in done)  # each prompt is hit with logits or computed
        return [d for d in done if d is not None]

    def _compute(self, model: Any, plan: list[_Planned]) -> None:
        """Each planned segment's cache (and, for a prompt's last, its last hidden row), in
        plan order (a segment after its parent); each memoised without logits at once."""
        for seg in plan:
            self._alone(model, plan, seg)
            if isinstance(seg.parent, int):  # a parent's cache is let go once its children have theirs
                parent = plan[seg.parent]
                parent.children -= 1
                if parent.children == 0 and not parent.head:
                    parent.cache = None  # (the memo keeps it, within its bound)

    def _parent_cache(self, plan: list[_Planned], seg: _Planned) -> Any:
        return plan[seg.parent].cache if isinstance(seg.parent, int) else seg.parent

    def _alone(self, model: Any, plan: list[_Planned], seg: _Planned) -> None:
        """One segment in a forward of its own, over a copy of its parent's cache."""
        self.forwards += 1
        self.tokens_computed += len(seg.ids)
        self._done(seg, *_forward_alone(model, seg.ids, seg.start, self._parent_cache(plan, seg)))

    def _done(self, seg: _Planned, last_row: torch.Tensor, cache: Any) -> None:
        self.segments += 1
        seg.cache = cache
        if seg.head:  # a copy of the last row, so the segment's hidden states are not held
            seg.hidden = last_row.clone()
        self._put(seg.key, None, cache)  # a later prompt of this call may continue it


@dataclass(eq=False)
class _Planned:
    """A segment :meth:`PrefillMemo.prefill_many` computes: its key, tokens, first position,
    parent (None, a memoised cache, or the index of an earlier planned segment) and results."""

    key: _Key
    ids: Sequence[int]
    start: int
    parent: Any
    head: bool
    cache: Any = None
    hidden: torch.Tensor | None = None
    children: int = 0  # planned segments continuing this one, not computed yet


def _forward_alone(model: Any, ids: Sequence[int], start: int, parent: Any) -> tuple[torch.Tensor, Any]:
    """The last hidden row and the cache of ``ids`` at positions ``start, ...`` in a forward of
    their own, over a copy of ``parent`` (None: a prompt's start)."""
    device = next(model.parameters()).device
    end = start + len(ids)
    out = decoder(model)(
        input_ids=torch.tensor([list(ids)], device=device),
        position_ids=torch.arange(start, end, device=device).unsqueeze(0),
        cache=copy.deepcopy(parent) if parent is not None else None,
        use_cache=True,
    )
    return out.last_hidden_state[0, -1:, :], out.cache
