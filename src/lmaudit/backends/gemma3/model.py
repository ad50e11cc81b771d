"""Gemma 3's text decoder and causal LM as torch modules with transformers' names and parameter
paths, and loading a ``save_pretrained`` checkpoint into them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lmaudit.backends.gemma3.cache import KVCache
from lmaudit.backends.gemma3.config import Gemma3TextConfig
from lmaudit.backends.gemma3.ops import (
    RMSNorm,
    RotaryEmbedding,
    apply_rotary_pos_emb,
    default_masks,
    sdpa_attention,
)
from lmaudit.backends.hf_attention import PackedMask, packed_blocks_attention


class Linear(nn.Linear):
    """``nn.Linear`` made on the meta device without initialising it (the checkpoint's weights
    are assigned afterwards; a random init would cost time, and on meta tensors it imports
    ``torch._dynamo``)."""

    def reset_parameters(self) -> None:
        pass


def _linear(n_in: int, n_out: int, bias: bool) -> nn.Linear:
    return Linear(n_in, n_out, bias=bias, device="meta")


class Gemma3MLP(nn.Module):
    def __init__(self, cfg: Gemma3TextConfig) -> None:
        super().__init__()
        self.gate_proj = _linear(cfg.hidden_size, cfg.intermediate_size, False)
        self.up_proj = _linear(cfg.hidden_size, cfg.intermediate_size, False)
        self.down_proj = _linear(cfg.intermediate_size, cfg.hidden_size, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class Gemma3Attention(nn.Module):
    def __init__(self, cfg: Gemma3TextConfig, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.is_sliding = cfg.layer_types[layer_idx] == "sliding_attention"
        self.head_dim = cfg.head_dim
        self.num_key_value_groups = cfg.num_attention_heads // cfg.num_key_value_heads
        self.scaling = cfg.query_pre_attn_scalar**-0.5
        width = cfg.num_attention_heads * cfg.head_dim
        self.q_proj = _linear(cfg.hidden_size, width, cfg.attention_bias)
        self.k_proj = _linear(cfg.hidden_size, cfg.num_key_value_heads * cfg.head_dim, cfg.attention_bias)
        self.v_proj = _linear(cfg.hidden_size, cfg.num_key_value_heads * cfg.head_dim, cfg.attention_bias)
        self.o_proj = _linear(width, cfg.hidden_size, cfg.attention_bias)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps, device="meta")
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps, device="meta")

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        mask: Any,
        cache: KVCache | None,
    ) -> torch.Tensor:
        shape = (*x.shape[:-1], -1, self.head_dim)
        q = self.q_norm(self.q_proj(x).view(shape).transpose(1, 2))
        k = self.k_norm(self.k_proj(x).view(shape).transpose(1, 2))
        v = self.v_proj(x).view(shape).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, *rope)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        if isinstance(mask, PackedMask):
            out = packed_blocks_attention(q, k, v, mask, self.scaling)
        else:
            out = sdpa_attention(self, q, k, v, mask)
        return self.o_proj(out.reshape(*x.shape[:-1], -1).contiguous())


class Gemma3DecoderLayer(nn.Module):
    def __init__(self, cfg: Gemma3TextConfig, layer_idx: int) -> None:
        super().__init__()
        self.attention_type = cfg.layer_types[layer_idx]
        self.self_attn = Gemma3Attention(cfg, layer_idx)
        self.mlp = Gemma3MLP(cfg)
        eps, h = cfg.rms_norm_eps, cfg.hidden_size
        self.input_layernorm = RMSNorm(h, eps, device="meta")
        self.post_attention_layernorm = RMSNorm(h, eps, device="meta")
        self.pre_feedforward_layernorm = RMSNorm(h, eps, device="meta")
        self.post_feedforward_layernorm = RMSNorm(h, eps, device="meta")

    def forward(
        self,
        x: torch.Tensor,
        rope_global: tuple[torch.Tensor, torch.Tensor],
        rope_local: tuple[torch.Tensor, torch.Tensor],
        mask: Any,
        cache: KVCache | None,
    ) -> torch.Tensor:
        rope = rope_local if self.self_attn.is_sliding else rope_global
        h = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), rope, mask, cache))
        return h + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(h)))


@dataclass
class DecoderOutput:
    last_hidden_state: torch.Tensor
    past_key_values: KVCache | None


@dataclass
class CausalLMOutput:
    logits: torch.Tensor
    past_key_values: KVCache | None


class ScaledEmbedding(nn.Embedding):
    embed_scale: torch.Tensor

    def __init__(self, cfg: Gemma3TextConfig) -> None:
        super().__init__(cfg.vocab_size, cfg.hidden_size, cfg.pad_token_id, device="meta")
        self.register_buffer("embed_scale", torch.tensor(cfg.hidden_size**0.5), persistent=False)

    def reset_parameters(self) -> None:  # the checkpoint's weights are assigned (see Linear)
        pass

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)


class Gemma3TextModel(nn.Module):
    """The decoder: embedding, layers, final norm (transformers' ``Gemma3TextModel``)."""

    def __init__(self, cfg: Gemma3TextConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embed_tokens = ScaledEmbedding(cfg)
        self.layers = nn.ModuleList([Gemma3DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, device="meta")
        factor = float(cfg.rope_scaling["factor"]) if cfg.rope_type == "linear" and cfg.rope_scaling else None
        self.rotary_emb = RotaryEmbedding(cfg, cfg.rope_theta, factor)
        self.rotary_emb_local = RotaryEmbedding(cfg, cfg.rope_local_base_freq, None)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: Any = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: KVCache | None = None,
        use_cache: bool | None = None,
        cache_position: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> DecoderOutput:
        """``attention_mask``: None (causal), one 4-D mask for every layer, or a mapping from
        layer type to its mask (a tensor or a packed mask); 2-D padding masks are refused."""
        if kwargs:
            raise TypeError(f"native Gemma 3 forward: unsupported arguments {sorted(kwargs)}")
        hidden = self.embed_tokens(input_ids)
        cache = past_key_values
        if cache is None and use_cache is not False:
            cache = KVCache(config=self.config)
        if cache_position is None:
            seen = cache.get_seq_length() if cache is not None else 0
            cache_position = torch.arange(seen, seen + hidden.shape[1], device=hidden.device)
        if position_ids is None:
            position_ids = cache_position.unsqueeze(0)
        masks: Mapping[str, Any]
        if isinstance(attention_mask, Mapping):
            masks = attention_mask
        elif attention_mask is None:
            masks = default_masks(self.config, hidden, cache_position, cache)
        elif isinstance(attention_mask, torch.Tensor) and attention_mask.ndim == 4:
            masks = {"full_attention": attention_mask, "sliding_attention": attention_mask}
        else:
            raise ValueError(
                "native Gemma 3 forward: only 4-D or per-layer-type attention masks are supported"
            )
        rope_global = self.rotary_emb(hidden, position_ids)
        rope_local = self.rotary_emb_local(hidden, position_ids)
        for layer in self.layers[: self.config.num_hidden_layers]:
            kind = str(layer.attention_type)
            hidden = layer(hidden, rope_global, rope_local, masks[kind], cache)
        return DecoderOutput(self.norm(hidden), cache)


class Gemma3ForCausalLM(nn.Module):
    """The decoder and its vocabulary head (tied to the embedding unless the config says not)."""

    def __init__(self, cfg: Gemma3TextConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = Gemma3TextModel(cfg)
        self.lm_head = _linear(cfg.hidden_size, cfg.vocab_size, False)

    def get_decoder(self) -> Gemma3TextModel:
        return self.model

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def forward(self, input_ids: torch.Tensor, logits_to_keep: int = 0, **kwargs: Any) -> CausalLMOutput:
        """The decoder's forward (:meth:`Gemma3TextModel.forward`, its keyword arguments), then
        the head over the last ``logits_to_keep`` positions (0: all)."""
        out = self.model(input_ids=input_ids, **kwargs)
        logits = self.lm_head(out.last_hidden_state[:, slice(-logits_to_keep, None), :])
        cap = self.config.final_logit_softcapping
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return CausalLMOutput(logits, out.past_key_values)


def _state_dict(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    single = model_dir / "model.safetensors"
    if single.is_file():
        return load_file(str(single))
    index = json.loads((model_dir / "model.safetensors.index.json").read_text(encoding="utf-8"))
    out: dict[str, torch.Tensor] = {}
    for shard in sorted(set(index["weight_map"].values())):
        out.update(load_file(str(model_dir / shard)))
    return out


def load_model(
    model_dir: str | Path, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> Gemma3ForCausalLM:
    """A ``save_pretrained`` Gemma 3 text checkpoint (safetensors) as :class:`Gemma3ForCausalLM`,
    in eval mode. Missing or unexpected weights are an error naming them."""
    model_dir = Path(model_dir)
    cfg = Gemma3TextConfig.from_file(model_dir / "config.json")
    model = Gemma3ForCausalLM(cfg)
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in _state_dict(model_dir).items()}
    if cfg.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    params = {name for name, _ in model.named_parameters()}
    need = params - ({"lm_head.weight"} if cfg.tie_word_embeddings else set())
    missing, unexpected = sorted(need - set(state)), sorted(set(state) - params)
    if missing or unexpected:
        raise ValueError(
            f"{model_dir}: not a Gemma 3 text checkpoint this implementation loads "
            f"(missing weights {missing[:5]}, unexpected {unexpected[:5]})"
        )
    model.load_state_dict(state, strict=False, assign=True)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    # the float buffers follow the weights' dtype, as transformers' from_pretrained leaves them
    for module in model.modules():
        if isinstance(module, ScaledEmbedding):
            module.embed_scale = module.embed_scale.to(dtype)
    return model.to(device).eval()
