"""The context check on an OpenAI-compatible server: the context is what the server reports
(llama.cpp ``/props`` ``n_ctx``, vLLM ``max_model_len``) and a prompt is counted by its tokenize
endpoint in the context the model reads; past it, nothing is posted to the model. A server that
reports no context, or cannot be reached, is not checked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from http_stub import JsonHandler, serving
from lmaudit.backends.base import SampleRequest
from lmaudit.backends.cached import CachedBackend
from lmaudit.backends.openai.backend import OpenAIBackend
from lmaudit.errors import PromptTooLong
from lmaudit.provenance.cache import ResponseCache

CONTEXT = 16


@dataclass
class Server:
    """A stub of ``kind`` llama.cpp (``/props``, ``/tokenize`` with ``content``, ``/apply-template``)
    or vLLM (``max_model_len`` in ``/models``, ``/tokenize`` with ``prompt`` or ``messages``):
    one token per word. ``report``: whether it reports its context."""

    kind: str
    report: bool = True
    generated: list[dict[str, Any]] = field(default_factory=list)


def _words(messages: list[dict[str, str]]) -> str:
    return " ".join(m["content"] for m in messages)


@pytest.fixture
def stub(request: pytest.FixtureRequest) -> Iterator[tuple[Server, str]]:
    server = Server(*request.param)

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            entry: dict[str, Any] = {"id": "toy", "object": "model"}
            if self.path.endswith("/models"):
                if server.kind == "vllm" and server.report:
                    entry["max_model_len"] = CONTEXT
                self._send({"object": "list", "data": [entry]})
            elif self.path == "/props" and server.kind == "llama.cpp" and server.report:
                self._send({"default_generation_settings": {"n_ctx": CONTEXT}})
            else:
                self._send({"error": "not found"}, 404)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/tokenize" and server.kind == "llama.cpp" and "content" in body:
                words = body["content"].split()
                self._send({"tokens": [{"id": 10 + i, "piece": w} for i, w in enumerate(words)]})
            elif self.path == "/apply-template" and server.kind == "llama.cpp":
                self._send({"prompt": _words(body["messages"])})
            elif (
                self.path == "/tokenize"
                and server.kind == "vllm"
                and ("prompt" in body or "messages" in body)
            ):
                text = body["prompt"] if "prompt" in body else _words(body["messages"])
                words = text.split()
                self._send({"tokens": list(range(len(words))), "count": len(words), "token_strs": words})
            elif self.path.endswith("/chat/completions"):
                server.generated.append(body)
                self._send({"choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}}]})
            else:
                self._send({"error": "not found"}, 404)

    with serving(Handler) as port:
        yield server, f"http://127.0.0.1:{port}/v1"


def _backend(url: str) -> OpenAIBackend:
    return OpenAIBackend({"base_url": url, "model": "toy", "max_retries": 0})


def _draw(words: int, max_tokens: int, probe: str) -> SampleRequest:
    messages = ({"role": "user", "content": " ".join(f"w{i}" for i in range(words))},)
    return SampleRequest(messages, n=1, max_tokens=max_tokens, seed=3, meta={"probe": probe, "replicate": 0})


@pytest.mark.parametrize("stub", [("llama.cpp",), ("vllm",)], indirect=True, ids=["llama.cpp", "vllm"])
def test_a_prompt_past_the_servers_context_is_never_posted(stub: tuple[Server, str], tmp_path: Path) -> None:
    server, url = stub
    backend = _backend(url)
    assert backend.context_length() == CONTEXT
    assert backend.prompt_lengths([_draw(5, 1, "p").messages, _draw(9, 1, "q").messages]) == [5, 9]
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache"), progress=False)
    with pytest.raises(PromptTooLong) as err:
        cached.sample([_draw(12, 4, "fits"), _draw(13, 4, "essay")])
    assert str(err.value).startswith("probe 'essay' (replicate 0): the prompt is 13 tokens + 4 to generate")
    assert f"({CONTEXT} tokens)" in str(err.value) and not server.generated
    assert len(cached.sample([_draw(12, 4, "fits")])[0].texts) == 1 and len(server.generated) == 1


@pytest.mark.parametrize(
    "stub", [("llama.cpp", False), ("vllm", False)], indirect=True, ids=["llama.cpp", "vllm"]
)
def test_a_server_that_reports_no_context_is_not_checked(stub: tuple[Server, str], tmp_path: Path) -> None:
    server, url = stub
    backend = _backend(url)
    assert backend.context_length() is None
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache"), progress=False)
    assert len(cached.sample([_draw(40, 4, "essay")])) == 1 and len(server.generated) == 1


def test_an_unreachable_server_is_not_needed_for_the_check() -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert _backend(f"http://127.0.0.1:{port}/v1").context_length() is None
