"""The ``openai`` model config: every field a ``model=`` config of the ``openai`` backend may
set, with its one default (:class:`~lmaudit.backends.openai.backend.OpenAIBackend` reads its
defaults from here)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from omegaconf import MISSING

from lmaudit.config.model import ModelConfig, schema_defaults
from lmaudit.config.ranges import ranged

__all__ = ["OPENAI_DEFAULTS", "OPENAI_FIELDS", "OpenAIModelConfig"]


@dataclass
class OpenAIModelConfig(ModelConfig):
    backend: str = "openai"
    base_url: str = MISSING
    model: str = MISSING
    endpoint: str = ranged("chat", choices=("chat", "completions"))
    chat_template: str | None = None  # required for endpoint=completions
    api_key_env: str = "OPENAI_API_KEY"
    revision: str | None = None
    top_logprobs: int = ranged(20, ge=1)
    label_space_variants: bool = False  # also count " A" for label "A" (recorded per result)
    bos_token: str = ""  # completions mode: servers add their own BOS
    # G1 tokenize endpoint
    tokenizer: str = ranged("auto", choices=("auto", "llama-cpp-python", "llama.cpp", "vllm", "none"))
    server_root: str | None = None  # default: base_url without a trailing /v1
    timeout_s: float = ranged(60.0, gt=0)
    max_retries: int = ranged(5, ge=0)
    backoff_base_s: float = ranged(0.5, ge=0)
    backoff_cap_s: float = ranged(30.0, ge=0)
    request_deadline_s: float = ranged(600.0, gt=0)  # total time for one request, retries and waits included
    # the most bytes of one answer read (8 MiB); a larger one is refused, never cached
    max_answer_bytes: int = ranged(8 << 20, ge=1)
    max_concurrency: int = ranged(1, ge=1)
    batch_size: int = ranged(8, ge=1)
    base_model: bool = False


#: The fields a model config of the ``openai`` backend may set, and their declared defaults.
OPENAI_FIELDS: frozenset[str] = frozenset(f.name for f in fields(OpenAIModelConfig))
OPENAI_DEFAULTS: dict[str, Any] = schema_defaults(OpenAIModelConfig)
