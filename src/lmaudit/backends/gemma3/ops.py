"""The operations of Gemma 3's layers, each as transformers computes it: rotary embeddings,
grouped-query attention through SDPA, the masks SDPA is given, the norms."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lmaudit.backends.gemma3.cache import KVCache
from lmaudit.backends.gemma3.config import Gemma3TextConfig


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary embeddings of queries and keys ``[batch, heads, positions, head_dim]`` (as
    transformers' Gemma 3 applies them)."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, heads, positions, dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, None, :, :]
        .expand(batch, heads, n_rep, positions, dim)
        .reshape(batch, heads * n_rep, positions, dim)
    )


def sdpa_attention(
    module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """Attention as transformers' SDPA function computes it on the CPU; ``[batch, positions,
    heads, head_dim]``."""
    extra: dict[str, Any] = {}
    if mask is None:
        extra["enable_gqa"] = True
    else:
        key = repeat_kv(key, module.num_key_value_groups)
        value = repeat_kv(value, module.num_key_value_groups)
        if mask.ndim == 4:
            mask = mask[:, :, :, : key.shape[-2]]
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=mask,
        dropout_p=0.0,
        scale=module.scaling,
        is_causal=query.shape[2] > 1 and mask is None,
        **extra,
    )
    return out.transpose(1, 2).contiguous()


def causal_mask(
    batch: int, cache_position: torch.Tensor, kv_length: int, kv_offset: int, window: int | None
) -> torch.Tensor | None:
    """The boolean mask ``[batch, 1, queries, keys]`` transformers' SDPA path builds when a
    forward is given none (None where SDPA's ``is_causal`` does the same)."""
    q = int(cache_position.shape[0])
    if (q == 1 or kv_length == q) and (window is None or kv_length < window):
        return None
    kv_idx = torch.arange(kv_length, device=cache_position.device) + kv_offset
    ok = kv_idx[None, :] <= cache_position[:, None]
    if window is not None:
        ok = ok & (kv_idx[None, :] > cache_position[:, None] - window)
    return ok[None, None].expand(batch, 1, q, kv_length).contiguous()


def default_masks(
    cfg: Gemma3TextConfig, hidden: torch.Tensor, cache_position: torch.Tensor, cache: KVCache | None
) -> dict[str, torch.Tensor | None]:
    """Each layer type's mask for a forward given none (:func:`causal_mask`), sized by the cache
    as transformers sizes it: from the first cache layer of that type (the first layer if none)."""
    sliding = cache.is_sliding if cache is not None else []
    out: dict[str, torch.Tensor | None] = {}
    for layer_type, window in (("full_attention", None), ("sliding_attention", cfg.sliding_window)):
        want = layer_type == "sliding_attention"
        idx = sliding.index(want) if want in sliding else 0
        if cache is not None:
            kv_length, kv_offset = cache.get_mask_sizes(cache_position, idx)
        else:
            kv_length, kv_offset = hidden.shape[1], 0
        out[layer_type] = causal_mask(hidden.shape[0], cache_position, kv_length, kv_offset, window)
    return out


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, device: Any = None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)


class RotaryEmbedding(nn.Module):
    inv_freq: torch.Tensor

    def __init__(self, cfg: Gemma3TextConfig, base: float, linear_factor: float | None) -> None:
        super().__init__()
        dim = cfg.head_dim
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim))
        if linear_factor is not None:
            inv_freq /= linear_factor
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1).to(x.device)
        pos = position_ids[:, None, :].float()
        device_type = x.device.type if x.device.type != "mps" else "cpu"
        with torch.autocast(device_type=device_type, enabled=False):
            freqs = (inv.float() @ pos.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos() * 1.0
            sin = emb.sin() * 1.0
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)
