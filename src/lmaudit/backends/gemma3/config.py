"""Gemma 3 text ``config.json`` fields, and which checkpoints this implementation computes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

#: Bump whenever a change alters what this implementation computes (part of the backend identity).
IMPLEMENTATION_VERSION = 1
MODEL_TYPE = "gemma3_text"
_ROPE_TYPES = ("default", "linear")


@dataclass
class Gemma3TextConfig:
    """The fields of a Gemma 3 text ``config.json`` this implementation reads, with
    transformers' defaults (``Gemma3TextConfig``) for the ones a file leaves out."""

    vocab_size: int = 262_208
    hidden_size: int = 2304
    intermediate_size: int = 9216
    num_hidden_layers: int = 26
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    head_dim: int = 256
    hidden_activation: str = "gelu_pytorch_tanh"
    max_position_embeddings: int = 131_072
    rms_norm_eps: float = 1e-6
    pad_token_id: int | None = 0
    eos_token_id: int | list[int] | None = 1
    bos_token_id: int | None = 2
    tie_word_embeddings: bool = True
    rope_theta: float = 1_000_000.0
    rope_local_base_freq: float = 10_000.0
    rope_scaling: dict[str, Any] | None = None
    attention_bias: bool = False
    query_pre_attn_scalar: float = 256
    sliding_window: int = 4096
    layer_types: list[str] = field(default_factory=list)
    final_logit_softcapping: float | None = None
    attn_logit_softcapping: float | None = None
    use_bidirectional_attention: bool = False
    sliding_window_pattern: int = 6
    use_cache: bool = True
    # read by the packed scoring (hf_attention.packed_attention sets it for transformers models)
    _attn_implementation: str = "sdpa"

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Gemma3TextConfig:
        known = {f.name for f in fields(cls)} - {"_attn_implementation"}
        values = {k: v for k, v in raw.items() if k in known}
        if "sliding_window_pattern" not in values and "_sliding_window_pattern" in raw:
            values["sliding_window_pattern"] = raw["_sliding_window_pattern"]
        cfg = cls(**values)
        if not cfg.layer_types:
            cfg.layer_types = [
                "sliding_attention" if (i + 1) % cfg.sliding_window_pattern else "full_attention"
                for i in range(cfg.num_hidden_layers)
            ]
        return cfg

    @classmethod
    def from_file(cls, path: Path) -> Gemma3TextConfig:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @property
    def rope_type(self) -> str:
        scaling = self.rope_scaling or {}
        return str(scaling.get("rope_type", scaling.get("type", "default")))


def unsupported(raw: Mapping[str, Any]) -> str | None:
    """Why a ``config.json`` (parsed) is not a Gemma 3 text model this module computes, or None."""
    if raw.get("model_type") != MODEL_TYPE:
        return f"model_type is {raw.get('model_type')!r}, not {MODEL_TYPE!r}"
    cfg = Gemma3TextConfig.from_dict(raw)
    if cfg.attn_logit_softcapping is not None:
        return "attention logit soft-capping"
    if cfg.use_bidirectional_attention:
        return "bidirectional attention"
    if cfg.rope_type not in _ROPE_TYPES:
        return f"RoPE type {cfg.rope_type!r}"
    if cfg.hidden_activation != "gelu_pytorch_tanh":
        return f"activation {cfg.hidden_activation!r}"
    if (
        set(cfg.layer_types) - {"sliding_attention", "full_attention"}
        or len(cfg.layer_types) != cfg.num_hidden_layers
    ):
        return f"layer types {sorted(set(cfg.layer_types))}"
    return None


def why_not_loadable(model_dir: Path) -> str | None:
    """Why a local checkpoint directory is not one this module loads (its ``config.json`` and
    safetensors weights), or None."""
    model_dir = Path(model_dir)
    try:
        raw = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no readable config.json"
    if not (
        (model_dir / "model.safetensors").is_file() or (model_dir / "model.safetensors.index.json").is_file()
    ):
        return "no safetensors weights"
    return unsupported(raw)


def supported(model_dir: Path) -> bool:
    """A local checkpoint directory this module can load."""
    return why_not_loadable(model_dir) is None
