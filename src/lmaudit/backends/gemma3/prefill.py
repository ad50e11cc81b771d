"""Several prefill segments in one forward of lmaudit's Gemma 3, each with the arithmetic it has
in a forward of its own.

Sampling prefills a prompt segment by segment over the KV cache of the segments before it
(:mod:`lmaudit.backends.hf_prefill`). A segment is short (a message: tens of tokens), and a
forward of a few dozen rows reads every weight of the model for them: gate G3's 12 prompts took
20 such forwards at 40-130 GFLOP/s where a chunk of several hundred rows runs the same
products at about 250. Here the segments of several prompts, and a segment together with the
segments it continues, share one forward:

* the row-wise work (embedding, norms, projections, MLP products, rotary products) runs on all
  their rows at once; the tanh-GELU, the one transcendental element-wise function there, runs
  on each segment's rows alone (:func:`_mlp`: an element-wise kernel's split between threads,
  and so its rounding at a thread's last elements, follows the tensor's size);
* attention runs segment by segment, in the order given (a segment after the one it
  continues), each over its own keys exactly as its own forward would attend: its parent's
  cache layer, copied, then its own keys appended (:class:`~lmaudit.backends.gemma3.KVLayer`),
  with the mask :func:`~lmaudit.backends.gemma3.default_masks` gives that forward, through the
  same :func:`~lmaudit.backends.gemma3.sdpa_attention` call; the rotary tables are computed
  per segment from its own positions, as there.

Every row of a segment then goes through the same operations as in its own forward, but the
matrix products have more rows. A row's result does not depend on the other rows for the
BLAS lmaudit runs with (MKL, in its conditional-numerical-reproducibility mode set by
:mod:`lmaudit`); that is a property of the library, not a guarantee of torch, so the caller
checks it on the machine before relying on it (:meth:`lmaudit.backends.hf_prefill.PrefillMemo`)
and falls back to one forward per segment where it does not hold.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F

from lmaudit.backends.gemma3.cache import KVCache, KVLayer
from lmaudit.backends.gemma3.model import Gemma3DecoderLayer, Gemma3ForCausalLM, Gemma3MLP
from lmaudit.backends.gemma3.ops import apply_rotary_pos_emb, causal_mask, sdpa_attention


@dataclass(frozen=True)
class Segment:
    """Tokens at positions ``start, start + 1, ...`` continuing ``parent``: None (the prompt's
    start), the KV cache of the tokens before (not mutated), or the index of an earlier segment
    of the same call."""

    ids: Sequence[int]
    start: int
    parent: KVCache | int | None


def _continued(parent: KVLayer | None, window: int | None) -> KVLayer:
    """A cache layer holding what ``parent`` holds (tensors shared: updates replace, never
    write into them), as a deep copy of the parent's cache would."""
    layer = KVLayer(window)
    if parent is not None:
        layer.keys, layer.values = parent.keys, parent.values
        layer.cumulative_length = parent.cumulative_length
    return layer


def _mlp(mlp: Gemma3MLP, x: torch.Tensor, bounds: Sequence[int]) -> torch.Tensor:
    """:meth:`Gemma3MLP.forward` over packed rows: the products over all rows, the tanh-GELU on
    each segment's rows alone. An element-wise kernel splits its elements between threads by
    their count, and the last few of a thread's share take a scalar path that rounds
    transcendental functions differently from the vector path; on one segment's rows the split
    is the one of the segment's own forward, whatever the thread count."""
    gate, up = mlp.gate_proj(x), mlp.up_proj(x)
    act = torch.cat([F.gelu(gate[:, a:b], approximate="tanh") for a, b in itertools.pairwise(bounds)], 1)
    return mlp.down_proj(act * up)


@torch.inference_mode()
def packed_prefill(
    model: Gemma3ForCausalLM, segments: Sequence[Segment]
) -> list[tuple[torch.Tensor, KVCache]]:
    """Per segment: its last row of final (normed) hidden states ``[1, hidden]`` and the KV cache
    after it, as ``model.model(input_ids=..., past_key_values=deepcopy(parent), ...)`` of that
    segment alone gives them (see the module docstring for when that is exact)."""
    if not segments:
        return []
    dec = model.model
    cfg = dec.config
    device = dec.embed_tokens.weight.device
    lengths = [len(s.ids) for s in segments]
    if min(lengths) < 1:
        raise ValueError("packed_prefill: an empty segment")
    bounds = [0]
    for n in lengths:
        bounds.append(bounds[-1] + n)
    for j, s in enumerate(segments):
        if isinstance(s.parent, int) and not 0 <= s.parent < j:
            raise ValueError(f"packed_prefill: segment {j} continues segment {s.parent}, not an earlier one")
    ids = torch.tensor([[t for s in segments for t in s.ids]], device=device)
    hidden = dec.embed_tokens(ids)
    positions = [
        torch.arange(s.start, s.start + n, device=device) for s, n in zip(segments, lengths, strict=True)
    ]
    ropes = []
    for rotary in (dec.rotary_emb, dec.rotary_emb_local):
        tables = [
            rotary(hidden[:, a:b], pos.unsqueeze(0))
            for a, b, pos in zip(bounds[:-1], bounds[1:], positions, strict=True)
        ]
        ropes.append((torch.cat([c for c, _ in tables], 1), torch.cat([s for _, s in tables], 1)))
    rope_global, rope_local = ropes
    caches = [KVCache(config=cfg) for _ in segments]
    masks: list[dict[str, torch.Tensor | None]] = [{} for _ in segments]
    n_rows = bounds[-1]
    layers = cast(list[Gemma3DecoderLayer], list(dec.layers[: cfg.num_hidden_layers]))
    for li, layer in enumerate(layers):
        attn = layer.self_attn
        window = cfg.sliding_window if attn.is_sliding else None
        kind = str(layer.attention_type)
        x = layer.input_layernorm(hidden)
        shape = (1, n_rows, -1, attn.head_dim)
        q = attn.q_norm(attn.q_proj(x).view(shape).transpose(1, 2))
        k = attn.k_norm(attn.k_proj(x).view(shape).transpose(1, 2))
        v = attn.v_proj(x).view(shape).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, *(rope_local if attn.is_sliding else rope_global))
        out = hidden.new_empty((1, n_rows, q.shape[1], attn.head_dim))
        for j, s in enumerate(segments):
            a, b = bounds[j], bounds[j + 1]
            if s.parent is None:
                parent_layer = None
            elif isinstance(s.parent, int):
                parent_layer = caches[s.parent].layers[li]
            else:
                parent_layer = s.parent.layers[li]
            own = _continued(parent_layer, window)
            if kind not in masks[j]:  # sized as the segment's own forward sizes it: before any update
                kv_length, kv_offset = own.get_mask_sizes(positions[j])
                masks[j][kind] = causal_mask(1, positions[j], kv_length, kv_offset, window)
            full_k, full_v = own.update(k[:, :, a:b], v[:, :, a:b])
            caches[j].layers[li] = own
            out[:, a:b] = sdpa_attention(attn, q[:, :, a:b], full_k, full_v, masks[j][kind])
        h = hidden + layer.post_attention_layernorm(attn.o_proj(out.reshape(1, n_rows, -1)))
        hidden = h + layer.post_feedforward_layernorm(
            _mlp(layer.mlp, layer.pre_feedforward_layernorm(h), bounds)
        )
    hidden = dec.norm(hidden)
    return [(hidden[0, b - 1 : b, :].clone(), cache) for b, cache in zip(bounds[1:], caches, strict=True)]
