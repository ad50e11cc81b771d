"""The ``hf`` model config: every field a ``model=`` config of the ``hf`` backend may set, with
its one default (:class:`~lmaudit.backends.hf.backend.HFBackend` takes its defaults from here).

Imports neither torch nor transformers: the config is checked, and Hydra's ConfigStore filled,
before any backend is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from lmaudit.config.execution import PRECISIONS, execution_problems
from lmaudit.config.model import ModelConfig, schema_defaults
from lmaudit.config.ranges import ranged

__all__ = ["DEFAULT_PACK_TOKENS", "HF_DEFAULTS", "HFModelConfig"]

#: Tokens per packed forward (queries); keys add the ancestors' cached tokens.
DEFAULT_PACK_TOKENS = 512


@dataclass
class HFModelConfig(ModelConfig):
    backend: str = "hf"
    model: str = MISSING  # "embedded:gemma3-270m" or a hub id / local path
    revision: str | None = None
    dtype: str = ranged("float32", choices=("float32", "bfloat16", "float16"))
    chat_template: str | None = None  # overrides the tokenizer's template
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    batch_size: int = ranged(16, ge=1)  # requests per call of the cache layer; shown by describe()
    base_model: bool = False  # a base checkpoint (no instruction tuning)
    # How the model runs (docs/scale.md); never part of the backend identity, a cache key or the plan.
    runner: str = ranged("inprocess", choices=("inprocess", "lightning"))
    devices: int = ranged(
        1, ge=1
    )  # processes per node (one per GPU; on CPU, each gets cores / devices threads)
    num_nodes: int = ranged(1, ge=1)
    strategy: str = ranged("ddp", choices=("ddp", "fsdp"))  # fsdp: a model too big for one device
    accelerator: str = ranged("auto", choices=("auto", "cpu", "gpu"))
    # default: the model's dtype ("32-true" for float32 ...); a "-mixed" precision computes under
    # autocast, which changes the arithmetic and so enters the identity
    precision: str | None = ranged(None, choices=PRECISIONS)
    device: str = ranged("cpu", nonempty=True)  # in-process: the torch device ("cpu", "cuda:0" ...)
    pack_tokens: int = ranged(DEFAULT_PACK_TOKENS, ge=1)  # query tokens per packed forward

    @staticmethod
    def check_relations(node: Any) -> list[str]:
        return execution_problems(node)


#: The declared defaults of :class:`HFModelConfig`, by field.
HF_DEFAULTS: dict[str, Any] = schema_defaults(HFModelConfig)
