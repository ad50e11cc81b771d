"""Whether gate G1 can be decided on a server, and the rendered context it checks.

G1 asks whether each label, appended to the context the model reads, is one token of the
served model. That needs the server's tokenizer (a tokenize endpoint) and that context:

* ``endpoint: completions``: lmaudit renders ``chat_template`` and posts the text, so the
  context is the text it posted;
* ``endpoint: chat`` with ``chat_template`` set: that template is declared to be the server's;
* ``endpoint: chat`` otherwise: llama.cpp's ``llama-server`` shows its rendering through
  ``/apply-template``; vLLM tokenizes the messages with its template (``/tokenize`` with
  ``messages``) and ``/detokenize`` gives the text back, used only when that text tokenizes to
  the same ids; llama-cpp-python's server applies its template inside ``/chat/completions``
  and shows it nowhere, so G1 cannot be decided there.

Without a tokenize endpoint (``tokenizer: none``: Ollama, hosted APIs) G1 cannot be decided.
A label found among the top log-probabilities at the answer position is no substitute: it
shows that some token spells the label, not that the label appended to the context tokenizes
as that one token (a merge across the boundary, or a split, goes unseen), and a label outside
the top-k shows nothing. :func:`refusal` says so before any request is made (docs/servers.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from lmaudit.backends.base import Message
from lmaudit.backends.openai.client import HttpClient
from lmaudit.errors import BackendError, ServerUnreachable
from lmaudit.provenance.redact import redact_url


class OpenAIBackend(Protocol):
    """What gate G1 reads of :class:`lmaudit.backends.openai.backend.OpenAIBackend`."""

    model: str
    endpoint: str
    tokenizer: str
    server_root: str
    chat_template: str | None
    _http: HttpClient

    def _post(self, url: str, body: dict[str, Any]) -> Any: ...

    def _render(self, messages: Sequence[Message]) -> str: ...

    def _dialect(self) -> str | None: ...


log = logging.getLogger(__name__)

PROBE: tuple[Message, ...] = ({"role": "user", "content": "Hello"},)
UNSEEN = (
    "{root} applies its chat template inside /chat/completions and shows the rendered context "
    "nowhere (llama-cpp-python's server has no /apply-template), so gate G1 cannot check the labels "
    "in the context the model reads; render the template here instead: model.endpoint=completions "
    "with model.chat_template (model=llamacpp does)"
)


def refusal(b: OpenAIBackend) -> str | None:
    """None when gate G1 can be decided on this server, else why not, in one line. The server
    is reached first (``GET /models``: ``cannot reach`` comes first); with ``tokenizer: none``
    nothing is posted, otherwise its tokenize endpoint is found and, in chat mode, its
    rendering tried once."""
    root = redact_url(b.server_root)
    b._http._ensure_checked()  # "cannot reach <url>" comes first (a GET, no POST)
    if b.tokenizer == "none":
        return (
            f"{root} has no tokenize endpoint (model.tokenizer=none), so gate G1 cannot check that "
            "each label is one token in the context the model reads"
        )
    if b.endpoint == "chat" and not b.chat_template and b.tokenizer == "llama-cpp-python":
        return UNSEEN.format(root=root)
    dialect = b._dialect()
    if dialect is None:
        tried = {"auto": "/extras/tokenize, /tokenize"}.get(b.tokenizer, f"model.tokenizer={b.tokenizer}")
        return (
            f"no tokenize endpoint answered at {root} (tried {tried}), so gate G1 cannot check that "
            "each label is one token in the context the model reads"
        )
    if b.endpoint == "chat" and not b.chat_template:
        if dialect == "llama-cpp-python":
            return UNSEEN.format(root=root)
        if context(b, dialect, PROBE) is None:
            return (
                f"{root} applies its chat template inside /chat/completions and did not show the "
                f"rendered context ({_how(dialect)} failed), so gate G1 cannot check the labels in the "
                "context the model reads; set model.endpoint=completions with model.chat_template"
            )
    return None


def _how(dialect: str) -> str:
    return "/tokenize with messages and /detokenize" if dialect == "vllm" else "/apply-template"


def context(b: OpenAIBackend, dialect: str | None, messages: Sequence[Message]) -> str | None:
    """The rendered context of ``messages`` as the model reads it, or None when unknown."""
    if b.chat_template:
        return b._render(messages)
    if b.endpoint != "chat" or dialect not in ("llama.cpp", "vllm"):
        return None
    try:
        if dialect == "llama.cpp":
            out = b._post(f"{b.server_root}/apply-template", {"messages": [dict(m) for m in messages]})
            prompt = out.get("prompt") if isinstance(out, dict) else None
            return prompt if isinstance(prompt, str) else None
        return _vllm_context(b, messages)
    except ServerUnreachable:
        raise
    except (BackendError, KeyError, TypeError, ValueError) as e:
        log.info("openai backend: the rendered context is unknown: %s", e)
        return None


def _vllm_context(b: OpenAIBackend, messages: Sequence[Message]) -> str | None:
    root, model = b.server_root, b.model
    body = {"model": model, "messages": [dict(m) for m in messages], "add_generation_prompt": True}
    ids = [int(t) for t in b._post(f"{root}/tokenize", body)["tokens"]]
    text = b._post(f"{root}/detokenize", {"model": model, "tokens": ids})["prompt"]
    back = b._post(f"{root}/tokenize", {"model": model, "prompt": text, "add_special_tokens": False})
    if not isinstance(text, str) or [int(t) for t in back["tokens"]] != ids:
        log.info("openai backend: vLLM's detokenized context does not tokenize back to its ids")
        return None
    return text
