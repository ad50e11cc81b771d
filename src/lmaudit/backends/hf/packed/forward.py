"""Prefix-cached, packed next-token forward passes for the ``hf`` backend.

Only the next-token distribution after each prompt is ever needed, and prompts share long
token prefixes (system prompt, few-shot exemplars, a QQ cell's position-1 prompt), so:

* every prompt of a call goes into one compressed token trie per first token
  (:func:`~lmaudit.backends.hf.packed.trie.build_prefix_tree`); each trie node is a token segment computed exactly once;
* the nodes are laid out in depth-first order as one token stream (:func:`~lmaudit.backends.hf.packed.trie.pack_forest`), a
  parent always before its children, and the stream is cut into chunks of ``pack_tokens``
  tokens. A chunk is one forward of a single packed row: its queries are the chunk's tokens,
  its keys the key/value cache of the ancestors computed in earlier chunks plus the chunk
  itself; an explicit 4-D mask lets each token see exactly its own prompt's earlier tokens
  (its ancestors' segments and its own segment up to itself), and position ids are each
  token's position in its prompt. There is no padding, nothing is computed twice, and the
  cache kept between chunks is only that of the current depth-first path (bounded memory);
* sliding-window layers get a mask that also drops keys more than ``window - 1`` prompt
  positions back, so the packing is exact for any window;
* for models that take one mask per layer type, attention runs by blocks of trie nodes, each
  over the keys it may see only (:mod:`lmaudit.backends.hf.packed.attention`), instead of one dense
  masked attention over the whole chunk;
* the decoder runs without its vocabulary head, and the head (262k rows for Gemma 3) runs on
  the final hidden states of the prompts' last tokens only, gathered over the unit, up to
  ``HEAD_ROWS`` rows at a time (:func:`~lmaudit.backends.hf.heads.vocabulary_logits`);
* the prompts, sorted by their ids, are first cut into *units* of equal trie size, at most
  ``unit_tokens`` (:func:`~lmaudit.backends.hf.packed.trie.scoring_units`), and each unit is its own forest, packed and chunked
  on its own. A unit's work therefore depends on its prompts only: the Lightning runner deals
  whole units to its ranks and each rank computes them as one process computes them (the same
  chunks and the same masks). The price is each unit recomputing the prefix it shares with the
  unit before (about 2% of the default audit's tokens at 4,096 tokens per unit).

Each token's arithmetic matches an unpadded, uncached forward of its own prompt up to
floating-point reassociation (checked against a naive forward in the tests, within 1e-5 in
probability). The cache between chunks is transformers' ``DynamicCache`` built from the
ancestors' keys and values (``ddp_cache_data``), the attention function is registered through
``AttentionInterface`` and selected with ``set_attn_implementation``, and the masks go in as
the model's documented per-layer-type mask mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from lmaudit.backends.hf.config import DEFAULT_PACK_TOKENS
from lmaudit.backends.hf.heads import vocabulary_logits
from lmaudit.backends.hf.packed.attention import install_packed_attention, packed_masks, plan_blocks
from lmaudit.backends.hf.packed.trie import (
    DEFAULT_MIN_SHARED_TOKENS,
    DEFAULT_UNIT_TOKENS,
    pack_forest,
    scoring_units,
)

#: Prompts whose logits one vocabulary-head product computes (bounds the logits held at once).
HEAD_ROWS = 256


def decoder(model: Any) -> Any:
    """The causal LM without its vocabulary head (returns normalised final hidden states)."""
    return model.get_decoder()


@dataclass
class ForwardStats:
    """Counters of the work done (for benchmarks and describe())."""

    forward_calls: int = 0
    tokens_real: int = 0  # tokens fed to the model, excluding padding
    tokens_padded: int = 0  # tokens fed to the model, including padding
    requests: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _sliding_window(model: Any) -> int | None:
    cfg = getattr(model, "config", None)
    window = getattr(cfg, "sliding_window", None)
    if window is None or getattr(cfg, "use_sliding_window", True) is False:
        return None
    return int(window)


def _mask_argument(model: Any, allowed: torch.Tensor, near: torch.Tensor, dtype: torch.dtype) -> Any:
    """The attention mask in the form the model takes: one additive 4-D mask, or one per layer type."""
    window = _sliding_window(model)
    neg = torch.finfo(dtype).min

    def additive(ok: torch.Tensor) -> torch.Tensor:
        return torch.zeros(ok.shape, dtype=dtype).masked_fill_(~ok, neg)[None, None]

    full = additive(allowed)
    types = set(getattr(model.config, "layer_types", None) or [])
    if not types:
        return full if window is None else additive(allowed & near)
    unknown = types - {"full_attention", "sliding_attention"}
    if unknown:
        raise ValueError(f"packed scoring does not support attention layer types {sorted(unknown)}")
    if "sliding_attention" not in types:
        return full
    return {"full_attention": full, "sliding_attention": additive(allowed & near)}


def _new_cache(layers: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> Any:
    """A transformers ``DynamicCache`` of full (not sliding-window) layers holding ``layers``'
    keys and values: the packed stream's positions are not one sequence's, so no layer may drop
    keys by position; the masks apply the window."""
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=layers) if layers else DynamicCache()


def _kv(cache: Any, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    entry = cache.layers[layer]
    return entry.keys, entry.values


@torch.inference_mode()
def next_token_logits(
    model: Any,
    ids: Sequence[Sequence[int]],
    *,
    stats: ForwardStats,
    pack_tokens: int = DEFAULT_PACK_TOKENS,
    min_shared: int = DEFAULT_MIN_SHARED_TOKENS,
    unit_tokens: int | None = DEFAULT_UNIT_TOKENS,
    on_chunk: Callable[[int], None] | None = None,
    block_attention: bool = True,
) -> Iterator[tuple[list[int], torch.Tensor]]:
    """Yield ``(indices, logits)``: next-token logits ``[len(indices), V]`` after ``ids[i]``,
    for up to ``HEAD_ROWS`` requests at a time once their unit's forwards are done. Every
    request is yielded once, unit by unit (:func:`~lmaudit.backends.hf.packed.trie.scoring_units`;
    ``unit_tokens=None``: all of ``ids`` is one unit), in each unit's depth-first order.
    ``on_chunk(n)`` follows each packed forward that finishes ``n`` requests.
    ``block_attention``: attention by blocks of trie nodes (:mod:`lmaudit.backends.hf.packed.attention`)
    where the model supports it; False: one dense masked attention per chunk."""
    if any(len(seq) == 0 for seq in ids):
        raise ValueError("cannot score an empty prompt")
    units = [list(range(len(ids)))] if unit_tokens is None else scoring_units(ids, unit_tokens)
    blocks = block_attention and install_packed_attention(model)
    for unit in units:
        for local, logits in _forest_logits(
            model, [ids[i] for i in unit], stats, pack_tokens, min_shared, on_chunk, blocks
        ):
            yield [unit[j] for j in local], logits


def _forest_logits(
    model: Any,
    ids: Sequence[Sequence[int]],
    stats: ForwardStats,
    pack_tokens: int,
    min_shared: int,
    on_chunk: Callable[[int], None] | None,
    blocks: bool,
) -> Iterator[tuple[list[int], torch.Tensor]]:
    """:func:`next_token_logits` of one unit: its forest, packed and chunked."""
    forest = pack_forest(ids, min_shared)
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    window = _sliding_window(model)
    n_layers: int | None = None
    store: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # node -> per-layer (K, V)
    pending: list[tuple[list[int], torch.Tensor]] = []  # (requests, final hidden state of each)
    total = len(forest.tokens)
    a = 0
    while a < total:
        b = min(total, a + max(1, pack_tokens))
        chunk_nodes = sorted(set(forest.node_of[a:b]))
        # keys from earlier chunks: every ancestor (and the node itself if it began earlier)
        past_nodes: set[int] = set()
        ancestors: dict[int, set[int]] = {}
        for n in chunk_nodes:
            path = {n}
            p = forest.parent[n]
            while p >= 0:
                path.add(p)
                p = forest.parent[p]
            ancestors[n] = path
            past_nodes.update(m for m in path if forest.first[m] < a)
        past = sorted(past_nodes, key=lambda m: forest.first[m])
        key_node: list[int] = []
        key_pos: list[int] = []
        for m in past:
            stop = min(forest.first[m] + forest.length[m], a)
            key_node.extend(forest.node_of[forest.first[m] : stop])
            key_pos.extend(forest.positions[forest.first[m] : stop])
        n_past = len(key_node)
        key_node.extend(forest.node_of[a:b])
        key_pos.extend(forest.positions[a:b])
        local = {n: j for j, n in enumerate(sorted(set(key_node)))}
        anc = torch.zeros(len(local), len(local), dtype=torch.bool)
        for n in chunk_nodes:
            anc[local[n], [local[m] for m in ancestors[n] if m in local]] = True
        q_local = torch.tensor([local[n] for n in forest.node_of[a:b]])
        k_local = torch.tensor([local[n] for n in key_node])
        q_pos = torch.tensor(forest.positions[a:b])
        k_pos = torch.tensor(key_pos)
        allowed = anc[q_local][:, k_local] & (k_pos[None, :] <= q_pos[:, None])
        near = (q_pos[:, None] - k_pos[None, :]) < (window if window is not None else total + 1)
        cache = _new_cache(
            [
                (
                    torch.cat([store[m][layer][0] for m in past], dim=2),
                    torch.cat([store[m][layer][1] for m in past], dim=2),
                )
                for layer in range(n_layers or 0)
            ]
            if past and n_layers
            else None
        )
        finishing = [
            n for n in chunk_nodes if forest.ends[n] and a <= forest.first[n] + forest.length[n] - 1 < b
        ]
        keep = torch.tensor([forest.first[n] + forest.length[n] - 1 - a for n in finishing], dtype=torch.long)
        if blocks:
            types = set(model.config.layer_types)
            ok = {"full_attention": allowed, "sliding_attention": allowed & near}
            plan = plan_blocks(forest.node_of[a:b], allowed)
            mask: Any = packed_masks(plan, {t: m for t, m in ok.items() if t in types}, dtype)
        else:
            mask = _mask_argument(model, allowed, near, dtype)
        out = decoder(model)(
            input_ids=torch.tensor([forest.tokens[a:b]], device=device),
            attention_mask=mask,
            position_ids=q_pos.unsqueeze(0).to(device),
            cache=cache,
            use_cache=True,
        )
        ends = torch.tensor(
            [int(keep[r]) for r, n in enumerate(finishing) for _ in forest.ends[n]], dtype=torch.long
        )
        final = out.last_hidden_state[0, ends.to(device), :]
        stats.forward_calls += 1
        stats.tokens_real += b - a
        stats.tokens_padded += b - a
        new_cache = out.cache
        n_layers = len(new_cache.layers)
        fresh = [
            tuple(t[:, :, n_past:, :].clone() for t in _kv(new_cache, layer)) for layer in range(n_layers)
        ]
        for n in chunk_nodes:
            if forest.sub_end[n] <= b:  # nothing after this chunk needs it
                store.pop(n, None)
                continue
            lo = max(forest.first[n], a) - a
            hi = min(forest.first[n] + forest.length[n], b) - a
            parts = [(k[:, :, lo:hi, :], v[:, :, lo:hi, :]) for k, v in fresh]
            if n in store:  # began in an earlier chunk
                parts = [
                    (torch.cat([k0, k1], dim=2), torch.cat([v0, v1], dim=2))
                    for (k0, v0), (k1, v1) in zip(store[n], parts, strict=True)
                ]
            store[n] = parts
        for m in [m for m in store if forest.sub_end[m] <= b]:
            del store[m]
        a = b
        done = [i for n in finishing for i in forest.ends[n]]
        if finishing:
            pending.append((done, final))
        stats.requests += len(done)
        if on_chunk is not None and done:
            on_chunk(len(done))
    # the vocabulary head over the unit's prompts, HEAD_ROWS at a time
    order = [i for idx, _ in pending for i in idx]
    hidden = torch.cat([h for _, h in pending]) if pending else torch.empty(0)
    for r in range(0, len(order), HEAD_ROWS):
        yield order[r : r + HEAD_ROWS], vocabulary_logits(model, hidden[r : r + HEAD_ROWS])
