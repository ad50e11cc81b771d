"""How to start the server a model config points at, said when nothing answers there.

A config that asks a local server for one of the embedded models (``model=llamacpp``,
``model=llamacpp_smollm2``) gets the command the README documents, with the config's port;
any other gets where to look (docs/servers.md)."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["LLAMA_CPP_MODELS", "start_hint"]

#: the models ``lmaudit gguf-path`` locates (the embedded models' GGUF files), served under
#: these aliases by the documented llama.cpp server
LLAMA_CPP_MODELS = ("gemma3-270m", "smollm2-135m")
_LOCAL = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def start_hint(base_url: str, model: str) -> str:
    """``"; start ..."``: what to run so that ``base_url`` answers for ``model``."""
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return "; start the server, or set model.base_url= to one that runs (docs/servers.md)"
    if parts.hostname in _LOCAL and model in LLAMA_CPP_MODELS:
        port = port or (443 if parts.scheme == "https" else 80)
        return (
            f'; start the documented server: python -m llama_cpp.server --model "$(lmaudit gguf-path {model})" '
            f"--model_alias {model} --port {port} --logits_all true (docs/servers.md)"
        )
    return f"; start the server that serves {model} there, or set model.base_url= to one that runs (docs/servers.md)"
