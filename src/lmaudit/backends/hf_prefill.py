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
before it (packed with others where that is exact, below).

The cut depends on the prompt only, never on what else is sampled or memoised, so a memo hit
returns exactly the tensors that recomputing the prefix would give: draws stay independent of
batching, of the order of requests and of the runner. Prompts that share leading messages (a
system prompt and exemplars, or a position-2 prompt extending a position-1 prompt) compute
those tokens once. The arithmetic differs from one unsplit forward (the logits agree to float
rounding), so the cut is part of the sampling cache key (:data:`PREFILL_KEY`).

:meth:`PrefillMemo.prefill_many` prefills several prompts at once. Each segment not memoised is
computed once, after the segment it continues; on lmaudit's Gemma 3 the segments of all the
prompts, and a segment together with the segments it continues, share forwards of up to
:data:`PACK_ROWS` rows, attention running segment by segment as in the segment's own forward
(:mod:`lmaudit.backends.gemma3.prefill`). That gives every segment bitwise the tensors of its
own forward if a matrix product's rows do not depend on the other rows, which holds for MKL in
the strict reproducibility mode lmaudit sets, for products of more than a few rows; each memo
checks it on its first packed forward (its shortest segment recomputed alone) and prefills
segment by segment from then on where it does not hold. A segment shorter than
:data:`PACK_MIN_TOKENS` (only a prompt's last can be) is never packed: on some processors MKL
computes a product of up to three rows with another kernel (measured on an AMD EPYC with
AVX-512: the rows of a 1-3-row product differ from the same rows in a product of four or
more), so such a segment's own forward does not give the bits of its rows in a larger
product. Then the prompts' vocabulary heads run together (:func:`vocabulary_logits_each`):
a prompt's head is its row in a product of at least four rows (zero rows pad fewer), for the
same reason, so that one product over several prompts gives each row bitwise its own head
(also checked): the head is 671 MB for Gemma 3's 262k-token vocabulary, and read once per
prompt it cost about as much as a short prompt's forward.
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lmaudit.backends.base import BackendError
from lmaudit.backends.hf_batching import decoder
from lmaudit.backends.hf_heads import HEAD_MIN_ROWS, vocabulary_logits_each

#: Shortest segment worth its own forward; a cut closer than this to the previous is dropped.
MIN_SEGMENT = 16
#: The sampling cache key's record of how prompts are prefilled (changes with MIN_SEGMENT, with
#: where the cuts fall and with how a prompt's head is computed; ``by-message/min16`` cut before
#: an assistant turn's opening, ``by-message/header/min16`` computed a prompt's head as a
#: product of its row alone, where it is now its row in a product of at least HEAD_MIN_ROWS).
PREFILL_KEY = f"by-message/header/min{MIN_SEGMENT}/head{HEAD_MIN_ROWS}"
#: Fewest tokens of a segment packed with others (a prompt's last segment may be shorter than
#: MIN_SEGMENT): on some processors MKL computes a product of up to three rows with another
#: kernel (an AMD EPYC with AVX-512), so such a segment's own forward does not give the bits of
#: its rows in a larger product; 8 leaves a margin.
PACK_MIN_TOKENS = 8
#: Default memory bound of the memo (KV caches and logits), in bytes.
DEFAULT_MEMO_BYTES = 512 * 2**20
#: Most rows of one packed prefill forward (segments of several prompts and their parents).
PACK_ROWS = 512

log = logging.getLogger(__name__)

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

    def __init__(self, max_bytes: int = DEFAULT_MEMO_BYTES, pack: bool | None = None) -> None:
        self.max_bytes = int(max_bytes)
        #: packed forwards: None until checked on first use (:meth:`_packing_exact`), then
        #: whether they are exact here; False: one forward per segment
        self.pack = pack
        # key: (the prefix's tokens, the segment ends it was computed in); the second part makes a
        # hit exact even for two prompts with equal tokens but different message boundaries
        self._entries: OrderedDict[_Key, tuple[torch.Tensor | None, Any, int]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.forwards = 0
        self.segments = 0
        self.tokens_computed = 0  # every token a forward ran, the check's included
        self.checked_tokens = 0  # of which the packing check's recomputation (_packing_exact)

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
        would give. The segments not memoised are computed once each, after the segment they
        continue: packed into forwards of up to :data:`PACK_ROWS` rows where the model is
        lmaudit's Gemma 3 and packing is exact on this machine (:meth:`_packing_exact`), else
        one forward each. The vocabulary heads of the prompts not memoised with logits run
        after them, together (:func:`~lmaudit.backends.hf_heads.vocabulary_logits_each`,
        the same products reading the output embedding once). A prompt that appears twice
        is computed once."""
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
            logits = vocabulary_logits_each(model, [h for h in hiddens if h is not None])
            for (final, idx), seg, row in zip(heads.items(), pending, logits, strict=True):
                self._put(final, row[0], seg.cache)
                for j in idx:
                    done[j] = (row[0], seg.cache)
        assert all(d is not None for d in done)  # each prompt is hit with logits or computed
        return [d for d in done if d is not None]

    def _compute(self, model: Any, plan: list[_Planned]) -> None:
        """Each planned segment's cache (and, for a prompt's last, its last hidden row), in
        plan order (a segment after its parent); each memoised without logits at once."""
        packable = (
            self.pack is not False
            and _packs(model)
            and all(isinstance(p.parent, (int, type(None))) or _is_kvcache(p.parent) for p in plan)
        )
        i = 0
        while i < len(plan):
            j = i + 1  # plan[i:j] in one forward: up to PACK_ROWS rows, no short segment
            if packable and len(plan[i].ids) >= PACK_MIN_TOKENS:
                rows = len(plan[i].ids)
                while (
                    j < len(plan)
                    and len(plan[j].ids) >= PACK_MIN_TOKENS
                    and rows + len(plan[j].ids) <= PACK_ROWS
                ):
                    rows += len(plan[j].ids)
                    j += 1
            if j - i == 1 or not self._packed(model, plan, i, j):
                for seg in plan[i:j]:  # (packing not exact here: as if it had not been tried)
                    self._alone(model, plan, seg)
                packable = packable and self.pack is not False
            for seg in plan[i:j]:  # a parent's cache is let go once its children have theirs
                if isinstance(seg.parent, int):
                    parent = plan[seg.parent]
                    parent.children -= 1
                    if parent.children == 0 and not parent.head:
                        parent.cache = None  # (the memo keeps it, within its bound)
            i = j

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

    def _packed(self, model: Any, plan: list[_Planned], i: int, j: int) -> bool:
        """plan[i:j] in one forward (:func:`lmaudit.backends.gemma3.prefill.packed_prefill`);
        False, with nothing kept, if packing is not exact here (checked on first use)."""
        from lmaudit.backends.gemma3.prefill import Segment, packed_prefill

        segs = [
            Segment(
                p.ids,
                p.start,
                p.parent - i if isinstance(p.parent, int) and p.parent >= i else self._parent_cache(plan, p),
            )
            for p in plan[i:j]
        ]
        outs = packed_prefill(model, segs)
        self.forwards += 1  # (counted even if its results are dropped below: work done)
        self.tokens_computed += sum(len(p.ids) for p in plan[i:j])
        if self.pack is None:
            self.pack = self._packing_exact(model, plan, i, j, outs)
            if not self.pack:
                return False
        for seg, (row, cache) in zip(plan[i:j], outs, strict=True):
            self._done(seg, row, cache)
        return True

    def _packing_exact(self, model: Any, plan: list[_Planned], i: int, j: int, outs: list[Any]) -> bool:
        """Whether the packed forward's shortest segment has bitwise the hidden row and KV cache
        of its own forward over the same parent cache (the parent's from the packed forward, if
        it was in it): the one assumption packing rests on, checked once per memo. (The
        shortest: a product of few rows is where a BLAS takes another kernel.)"""
        at = min(range(i, j), key=lambda n: (len(plan[n].ids), n))
        seg = plan[at]
        parent = seg.parent
        if isinstance(parent, int) and parent >= i:
            parent = outs[parent - i][1]
        elif isinstance(parent, int):
            parent = plan[parent].cache
        alone_row, alone_cache = _forward_alone(model, seg.ids, seg.start, parent)
        self.forwards += 1
        self.tokens_computed += len(seg.ids)
        self.checked_tokens += len(seg.ids)
        row, cache = outs[at - i]
        same = torch.equal(row, alone_row) and all(
            torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
            for a, b in zip(cache.layers, alone_cache.layers, strict=True)
        )
        if not same:
            log.warning(
                "packed prefill is not bitwise equal to one forward per segment on this machine; "
                "prefilling segment by segment (slower, same draws)"
            )
        return same


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
        cache_position=torch.arange(start, end, device=device),
        past_key_values=copy.deepcopy(parent) if parent is not None else None,
        use_cache=True,
    )
    return out.last_hidden_state[0, -1:, :], out.past_key_values


def _packs(model: Any) -> bool:
    from lmaudit.backends.gemma3 import Gemma3ForCausalLM

    return isinstance(model, Gemma3ForCausalLM)


def _is_kvcache(cache: Any) -> bool:
    from lmaudit.backends.gemma3 import KVCache

    return isinstance(cache, KVCache)
