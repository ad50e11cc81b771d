"""A server's context length and a prompt's token count there, for the context check
(:mod:`lmaudit.backends.context`).

The context is what the server reports, where it does: llama.cpp's ``GET /props``
(``default_generation_settings.n_ctx``, or ``n_ctx``), vLLM's ``max_model_len`` in its
``/models`` entry of the served model. A prompt is counted as the model reads it: the rendered
context gate G1 uses (:func:`lmaudit.backends.openai.g1.context`: the text posted, or the
server's own rendering), tokenized by the server's tokenize endpoint; vLLM counts chat messages
itself (``/tokenize`` with ``messages``). Where either is unknown (Ollama, hosted APIs,
llama-cpp-python's server, a server that cannot be reached: a run from the cache needs none)
nothing is checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from lmaudit.backends.base import Message
from lmaudit.backends.openai import g1
from lmaudit.errors import BackendError, ServerUnreachable


class Server(g1.OpenAIBackend, Protocol):
    """What the context check reads of :class:`lmaudit.backends.openai.backend.OpenAIBackend`."""

    base_url: str

    def _tokenize(self, dialect: str, text: str) -> tuple[list[int], list[str] | None]: ...


def _positive(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x > 0 else None


def served_context(b: Server) -> int | None:
    """The context the server reports for the model, when its prompts can also be counted
    there; None otherwise (unknown, uncountable, or no server reachable)."""
    try:
        listing = b._http.check_server()
    except (ServerUnreachable, BackendError):
        return None
    found: int | None = None
    entries = listing.get("data") if isinstance(listing, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("id") == b.model:
            found = _positive(entry.get("max_model_len"))
    if found is None:
        props = b._http.get_json(f"{b.server_root}/props")
        if isinstance(props, dict):
            settings = props.get("default_generation_settings")
            found = _positive(settings.get("n_ctx") if isinstance(settings, dict) else None)
            found = found or _positive(props.get("n_ctx"))
    if found is None:
        return None
    try:  # counted by the server's tokenizer, in the context the model reads
        dialect = b._dialect()
    except (ServerUnreachable, BackendError):
        return None
    if dialect not in ("llama.cpp", "vllm"):
        return None
    unseen = dialect == "llama.cpp" and b.endpoint == "chat" and not b.chat_template
    if unseen and g1.context(b, dialect, g1.PROBE) is None:  # its rendering is not shown
        return None
    return found


def prompt_tokens(b: Server, messages: Sequence[Message]) -> int:
    """The prompt's token count as the server's model reads it; BackendError when the server
    cannot say (its rendering unseen)."""
    dialect = b._dialect()
    if dialect == "vllm" and b.endpoint == "chat" and not b.chat_template:
        body = {"model": b.model, "messages": [dict(m) for m in messages], "add_generation_prompt": True}
        out = b._post(f"{b.server_root}/tokenize", body)
        tokens = out.get("tokens") if isinstance(out, dict) else None
        if isinstance(tokens, list):
            return len(tokens)
        raise BackendError(f"tokenize (vllm): unexpected response {str(out)[:200]}")
    text = g1.context(b, dialect, messages) if dialect is not None else None
    if text is None or dialect is None:
        raise BackendError(
            f"{b.server_root} does not show the rendered prompt, so its token count is unknown"
        )
    return len(b._tokenize(dialect, text)[0])
