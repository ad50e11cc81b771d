"""The KV cache of lmaudit's Gemma 3 forward, layer by layer as transformers' ``DynamicCache`` keeps it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from lmaudit.backends.gemma3.config import Gemma3TextConfig


class KVLayer:
    """One layer's keys and values ``[batch, kv_heads, positions, head_dim]``, as transformers'
    ``DynamicLayer`` (``sliding_window`` None) or ``DynamicSlidingWindowLayer`` keeps them."""

    def __init__(self, sliding_window: int | None = None) -> None:
        self.sliding_window = sliding_window
        self.is_sliding = sliding_window is not None
        self.cumulative_length = 0
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def is_initialized(self) -> bool:
        return self.keys is not None

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append; return every key and value the new positions attend over."""
        if self.keys is None or self.values is None:
            self.keys = torch.tensor([], dtype=keys.dtype, device=keys.device)
            self.values = torch.tensor([], dtype=values.dtype, device=values.device)
        full_k = torch.cat([self.keys, keys], dim=-2)
        full_v = torch.cat([self.values, values], dim=-2)
        if self.sliding_window is None:
            self.keys, self.values = full_k, full_v
            return full_k, full_v
        self.cumulative_length += keys.shape[-2]
        self.keys = full_k[:, :, -self.sliding_window + 1 :, :]
        self.values = full_v[:, :, -self.sliding_window + 1 :, :]
        return full_k, full_v

    def get_seq_length(self) -> int:
        if self.sliding_window is not None:
            return self.cumulative_length
        return 0 if self.keys is None or self.keys.numel() == 0 else int(self.keys.shape[-2])

    def get_mask_sizes(self, cache_position: torch.Tensor) -> tuple[int, int]:
        """(keys the next forward attends over, position of the first of them)."""
        q = int(cache_position.shape[0])
        if self.sliding_window is None:
            return self.get_seq_length() + q, 0
        offset = max(self.cumulative_length - self.sliding_window + 1, 0)
        if self.cumulative_length >= self.sliding_window:
            return self.sliding_window - 1 + q, offset
        return self.cumulative_length + q, offset

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.keys is not None and self.values is not None and self.get_seq_length() > 0:
            self.keys = self.keys.repeat_interleave(repeats, dim=0)
            self.values = self.values.repeat_interleave(repeats, dim=0)


class KVCache:
    """The KV cache of a forward, layer by layer, as transformers' ``DynamicCache`` keeps it.

    ``KVCache()`` grows one unbounded layer per layer index on first use; ``config=`` makes a
    layer per decoder layer, sliding layers bounded to the window; ``ddp_cache_data=`` starts
    unbounded layers filled with the given ``(keys, values)``."""

    def __init__(
        self,
        ddp_cache_data: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None,
        config: Gemma3TextConfig | None = None,
    ) -> None:
        self.layers: list[KVLayer] = []
        self._grow = config is None and ddp_cache_data is None
        if config is not None:
            self.layers = [
                KVLayer(config.sliding_window if t == "sliding_attention" else None)
                for t in config.layer_types
            ]
        for i, (k, v) in enumerate(ddp_cache_data or ()):
            if config is None:
                self.layers.append(KVLayer())
            self.layers[i].update(k, v)

    def update(
        self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int, cache_kwargs: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self._grow:
            while len(self.layers) <= layer_idx:
                self.layers.append(KVLayer())
        return self.layers[layer_idx].update(keys, values)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.layers[layer_idx].get_seq_length() if layer_idx < len(self.layers) else 0

    def get_mask_sizes(self, cache_position: torch.Tensor, layer_idx: int) -> tuple[int, int]:
        if layer_idx >= len(self.layers):
            return int(cache_position.shape[0]), 0
        return self.layers[layer_idx].get_mask_sizes(cache_position)

    @property
    def is_sliding(self) -> list[bool]:
        return [layer.is_sliding for layer in self.layers]

    def batch_repeat_interleave(self, repeats: int) -> None:
        for layer in self.layers:
            layer.batch_repeat_interleave(repeats)
