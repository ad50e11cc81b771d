"""Block-sparse attention for the packed prefix-trie forwards of :mod:`lmaudit.backends.hf.packed.forward`.

A packed chunk holds the tokens of many trie nodes; each token may attend only to its own
prompt's earlier tokens (its ancestors' segments and its own segment up to itself). A dense
attention over the chunk's queries and all its keys, with the rest masked, computes every
(query, key) pair and throws most away: on the default audit that was a sixth of the scoring
time. Here the chunk's queries are cut into *blocks* of consecutive trie nodes, and each block
attends only to the union of its nodes' visible keys (gathered), with a small mask for the rest:

* a node's tokens are consecutive in the chunk, and its last token sees every key any of its
  tokens sees (the same ancestors, causal within the node), so that row names the node's keys;
* neighbouring nodes are merged into one block while one attention call over the union costs
  less than two calls (:data:`CALL_COST` pairs for the call itself), so the many short leaves
  of a trie do not each pay a call.

The result equals the dense masked attention up to floating-point reassociation (masked keys
contribute exact zeros to either). It is used for models whose layers take one mask per layer
type (``config.layer_types``: Gemma 3, Qwen 3, ...), whose forward passes a mask mapping
through to the attention function unchanged; other models keep the dense additive mask. The
attention function is registered with transformers as ``lmaudit_packed+<base>``, with the mask
function of ``<base>``, and selected once per model (:func:`install_packed_attention`): any mask
but a :class:`PackedMask` goes to ``<base>``, so the model's ordinary forwards are unchanged.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

NAME = "lmaudit_packed"
#: The cost of one attention call, in (query, key) pairs, when deciding to merge two blocks.
CALL_COST = 1024


@dataclass(frozen=True)
class Block:
    q0: int  # first query row of the block in the chunk
    q1: int  # one past its last
    keys: torch.Tensor  # indices into the forward's keys (past + chunk) the block may see
    mask: torch.Tensor  # [1, 1, q1 - q0, len(keys)] additive
    span: tuple[int, int] | None = None  # the keys as a range, when they are one


@dataclass(frozen=True)
class PackedMask:
    """One layer type's attention pattern of a packed chunk, as blocks."""

    blocks: tuple[Block, ...]


def plan_blocks(node_of_query: list[int], visible: torch.Tensor) -> list[tuple[int, int, torch.Tensor]]:
    """``(q0, q1, key indices)`` per block: runs of queries of one node, merged while cheaper.

    ``visible[q, k]`` says whether query ``q`` may see key ``k`` under any layer's mask (the
    full-attention pattern; sliding windows only remove keys)."""
    runs: list[tuple[int, int, torch.Tensor]] = []
    start = 0
    for q in range(1, len(node_of_query) + 1):
        if q == len(node_of_query) or node_of_query[q] != node_of_query[start]:
            runs.append((start, q, torch.nonzero(visible[q - 1], as_tuple=False).flatten()))
            start = q
    blocks: list[tuple[int, int, torch.Tensor]] = []
    for q0, q1, keys in runs:
        if blocks:
            p0, _, pkeys = blocks[-1]
            union = torch.unique(torch.cat([pkeys, keys]))  # sorted
            apart = (blocks[-1][1] - p0) * len(pkeys) + (q1 - q0) * len(keys) + 2 * CALL_COST
            together = (q1 - p0) * len(union) + CALL_COST
            if together <= apart:
                blocks[-1] = (p0, q1, union)
                continue
        blocks.append((q0, q1, keys))
    return blocks


def packed_masks(
    plan: list[tuple[int, int, torch.Tensor]], ok_by_type: dict[str, torch.Tensor], dtype: torch.dtype
) -> dict[str, PackedMask]:
    """Each layer type's blocks: the plan's key indices with that type's additive mask."""
    neg = torch.finfo(dtype).min
    out: dict[str, PackedMask] = {}
    made: list[tuple[torch.Tensor, PackedMask]] = []
    for layer_type, ok in ok_by_type.items():
        same = next((m for o, m in made if o is ok or torch.equal(o, ok)), None)
        if same is not None:  # e.g. a sliding window longer than every prompt: one set of masks
            out[layer_type] = same
            continue
        blocks = []
        for q0, q1, keys in plan:
            sub = ok[q0:q1].index_select(1, keys)
            mask = torch.zeros(sub.shape, dtype=dtype).masked_fill_(~sub, neg)[None, None]
            span = None
            if int(keys[-1]) - int(keys[0]) + 1 == len(keys):  # contiguous keys: a view, no gather
                span = (int(keys[0]), int(keys[-1]) + 1)
            blocks.append(Block(q0, q1, keys, mask, span))
        out[layer_type] = PackedMask(tuple(blocks))
        made.append((ok, out[layer_type]))
    return out


def packed_attention_forward(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    *,
    fallback: Any,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """transformers' attention-function signature; a :class:`PackedMask` is attended by blocks,
    anything else by ``fallback`` (a function registered in transformers' ``AttentionInterface``)."""
    if not isinstance(attention_mask, PackedMask):
        return fallback(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    return packed_blocks_attention(query, key, value, attention_mask, scaling), None


def packed_blocks_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: PackedMask, scaling: float | None
) -> torch.Tensor:
    """Attention of a packed chunk's queries ``[batch, heads, n_q, dim]`` by the blocks of
    ``mask``, each over its own keys; ``[batch, n_q, heads, dim]``."""
    batch, heads, n_q, _ = query.shape
    out = query.new_empty((batch, heads, n_q, value.shape[-1]))
    gqa = heads != key.shape[1]
    for b in mask.blocks:
        if b.span is not None:
            k, v = key[:, :, b.span[0] : b.span[1]], value[:, :, b.span[0] : b.span[1]]
        else:
            k, v = key.index_select(2, b.keys), value.index_select(2, b.keys)
        out[:, :, b.q0 : b.q1] = F.scaled_dot_product_attention(
            query[:, :, b.q0 : b.q1], k, v, attn_mask=b.mask, scale=scaling, enable_gqa=gqa
        )
    return out.transpose(1, 2).contiguous()


def supports_packed_attention(model: Any) -> bool:
    """Models whose forward takes one mask per layer type and has no logit soft-capping."""
    cfg = getattr(model, "config", None)
    types = set(getattr(cfg, "layer_types", None) or [])
    return (
        bool(types)
        and types <= {"full_attention", "sliding_attention"}
        and getattr(cfg, "attn_logit_softcapping", None) is None
    )


#: Each model asked: whether it attends packed masks by blocks (decided once per model).
_INSTALLED: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def install_packed_attention(model: Any, base: str | None = None) -> bool:
    """Select packed attention for ``model`` where it supports it (:func:`supports_packed_attention`):
    the attention function ``lmaudit_packed+<base>`` registered with transformers'
    ``AttentionInterface`` and selected with ``set_attn_implementation``, which attends by blocks
    for a :class:`PackedMask` and calls ``base`` (default ``sdpa``, any function registered there)
    for every other mask, so the model's ordinary forwards are unchanged. Decided on the first
    call for a model (a ``base`` not registered there, such as ``eager``, keeps the model as it
    is: packed scoring then uses dense masks); returns whether ``model`` attends packed masks by
    blocks."""
    if model in _INSTALLED:
        return _INSTALLED[model]
    from transformers import AttentionInterface, AttentionMaskInterface

    base = base or "sdpa"
    functions = AttentionInterface()
    ok = supports_packed_attention(model) and base in functions
    if ok:
        name = f"{NAME}+{base}"
        if name not in functions:
            AttentionInterface.register(
                name, functools.partial(packed_attention_forward, fallback=functions[base])
            )
        # the masks of ordinary forwards (padding, sliding windows) are built as for `base`:
        # transformers builds none for a name without a mask function
        masks = AttentionMaskInterface()
        if base in masks and name not in masks:
            AttentionMaskInterface.register(name, masks[base])
        model.set_attn_implementation(name)
    _INSTALLED[model] = ok
    return ok
