"""The last decoder layer of a packed forward, computed in full only where logits are needed.

In the last layer, a token's query, attention output, output projection and MLP feed nothing but
its own final hidden state, and packed scoring keeps that only at each prompt's last token. Its
keys and values are still needed (later chunks' prompt ends attend to them). So the packed
forward runs the decoder's first ``L - 1`` layers over the whole chunk, then the last layer's
norm, key and value projections over every token (into the KV cache) and the rest over the
prompt ends only: about 5% fewer FLOPs for Gemma 3 270M (llama.cpp skips the last layer's
feed-forward for unused tokens likewise). The arithmetic per kept token is that of the model's
own layer (checked against the unpacked forward in the tests).

The layer is written out as Gemma 3's (transformers' ``Gemma3DecoderLayer``: q/k norms, the
sandwich norms around attention and MLP, local and global rotary embeddings), so only that
architecture takes this path; :func:`supports_last_layer_rows` says which models do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from lmaudit.backends.gemma3 import apply_rotary_pos_emb


def supports_last_layer_rows(model: Any) -> bool:
    """Gemma 3 text decoders without attention logit soft-capping."""
    base = model.get_decoder()
    return (
        type(base).__name__ == "Gemma3TextModel"
        and getattr(model.config, "attn_logit_softcapping", None) is None
        and len(base.layers) == model.config.num_hidden_layers >= 2
    )


@contextlib.contextmanager
def without_last_layer(model: Any) -> Iterator[None]:
    """Within: the decoder runs its first ``L - 1`` layers and returns their output unnormalised."""
    base = model.get_decoder()
    n, norm = base.config.num_hidden_layers, base.norm
    base.config.num_hidden_layers = n - 1
    base.norm = torch.nn.Identity()
    try:
        yield
    finally:
        base.config.num_hidden_layers = n
        base.norm = norm


def last_layer_rows(
    model: Any,
    hidden: torch.Tensor,
    rows: torch.Tensor,
    visible: torch.Tensor,
    position_ids: torch.Tensor,
    cache: Any,
    cache_position: torch.Tensor,
) -> torch.Tensor:
    """The last layer over a chunk: keys and values of every token into ``cache``; the final,
    normalised hidden states ``[len(rows), H]`` of the tokens ``rows`` only.

    ``hidden`` ``[1, T, H]``: the chunk after the first ``L - 1`` layers; ``visible`` ``[T, K]``
    (bool): which of the cache's keys after this chunk each token may see (the layer type's
    mask: sliding layers include the window); ``position_ids`` ``[1, T]``."""
    base = model.get_decoder()
    layer = base.layers[-1]
    attn = layer.self_attn
    rotary = base.rotary_emb_local if attn.is_sliding else base.rotary_emb
    cos, sin = rotary(hidden, position_ids)
    x = layer.input_layernorm(hidden)
    shape = (1, hidden.shape[1], -1, attn.head_dim)
    k = attn.k_norm(attn.k_proj(x).view(shape).transpose(1, 2))
    v = attn.v_proj(x).view(shape).transpose(1, 2)
    k, _ = apply_rotary_pos_emb(k, k, cos, sin)
    keys, values = cache.update(
        k, v, attn.layer_idx, {"sin": sin, "cos": cos, "cache_position": cache_position}
    )
    if rows.numel() == 0:
        return hidden.new_empty(0, hidden.shape[-1])
    sel = (1, rows.numel(), -1, attn.head_dim)
    q = attn.q_norm(attn.q_proj(x[:, rows]).view(sel).transpose(1, 2))
    q, _ = apply_rotary_pos_emb(q, q, cos[:, rows], sin[:, rows])
    out = torch.nn.functional.scaled_dot_product_attention(
        q, keys, values, attn_mask=visible[rows].to(q.device), scale=attn.scaling, enable_gqa=True
    )
    out = attn.o_proj(out.transpose(1, 2).reshape(1, rows.numel(), -1))
    h = hidden[:, rows] + layer.post_attention_layernorm(out)
    h = h + layer.post_feedforward_layernorm(layer.mlp(layer.pre_feedforward_layernorm(h)))
    return base.norm(h)[0]
