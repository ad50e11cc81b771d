"""Loading the ``hf`` backend's tokenizer and model with transformers (``AutoTokenizer``,
``AutoModelForCausalLM``): any architecture, hub ids, revisions, ``attn_implementation``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lmaudit.errors import BackendError


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def load_error(model_path: str, exc: Exception) -> BackendError:
    """A loading failure as a BackendError that says what to do (offline: where the model must be)."""
    if _offline() and not Path(model_path).exists():
        return BackendError(
            f"hf backend: model {model_path!r} is not available offline; HF_HUB_OFFLINE is set and it "
            "is not in the local Hugging Face cache. Download it where the hub is reachable, or point "
            f"`model` at a local directory. ({type(exc).__name__}: {exc})"
        )
    return BackendError(f"hf backend: could not load model {model_path!r}: {exc}")


def _gguf(gguf_file: str | None) -> dict[str, Any]:
    return {"gguf_file": gguf_file} if gguf_file else {}


def load_tokenizer(model_path: str, revision: str | None, gguf_file: str | None = None) -> Any:
    """The checkpoint's tokenizer (``AutoTokenizer``); ``gguf_file``: a GGUF file in ``model_path``."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model_path, revision=revision, **_gguf(gguf_file))
    except (OSError, ValueError) as exc:
        raise load_error(model_path, exc) from exc


def load_model(
    model_path: str,
    revision: str | None,
    dtype: str,
    device: str,
    attn_implementation: str | None,
    gguf_file: str | None = None,
) -> Any:
    """The causal LM in eval mode on ``device`` (a GGUF file's weights dequantised)."""
    import torch
    from transformers import AutoModelForCausalLM

    from lmaudit.backends.vector_math import settle

    settle()  # before any forward (vector_math.py)
    kwargs: dict[str, Any] = {"revision": revision, "dtype": getattr(torch, dtype), **_gguf(gguf_file)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    try:
        model: Any = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
    except (OSError, ValueError) as exc:
        raise load_error(model_path, exc) from exc
    return model.to(device).eval()


#: A tokenizer's ``model_max_length`` at or past this is transformers' "not set" placeholder.
_UNSET_MAX_LENGTH = 10**9


def context_length(
    model_path: str, revision: str | None, tokenizer: Any, gguf_file: str | None = None
) -> int | None:
    """The most positions the model holds: its (text) config's ``max_position_embeddings``,
    else the tokenizer's ``model_max_length`` when it is set; None when neither says."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model_path, revision=revision, **_gguf(gguf_file))
        config = config.get_text_config()
    except (OSError, ValueError) as exc:
        raise load_error(model_path, exc) from exc
    found = getattr(config, "max_position_embeddings", None)
    if isinstance(found, int) and found > 0:
        return found
    found = getattr(tokenizer, "model_max_length", None)
    if isinstance(found, int) and 0 < found < _UNSET_MAX_LENGTH:
        return found
    return None


def implementation_identity() -> dict[str, Any]:
    """What names the code that computes the outputs, for the backend identity."""
    import transformers

    return {"transformers": transformers.__version__}
