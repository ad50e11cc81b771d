"""The ``sim`` model config: the agent a ``model=`` config names, its seed and its fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from lmaudit.config.model import ModelConfig
from lmaudit.config.ranges import ranged

__all__ = ["SimModelConfig"]


@dataclass
class SimModelConfig(ModelConfig):
    backend: str = "sim"
    agent: str = (
        MISSING  # projective | repetition | mixture_repetition | luders_symmetric | luders_asymmetric
    )
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    batch_size: int = ranged(256, ge=1)
    base_model: bool = False
