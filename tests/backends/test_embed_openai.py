"""OpenAIEmbedder against a real (tiny) HTTP server on 127.0.0.1 that speaks the
``/v1/embeddings`` format, can be told to fail with 429/503/400, and answers rows out of
order. The key comes from the environment only and never leaks into errors or identity."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmaudit.backends.embed.base import EmbeddingBackend
from lmaudit.backends.embed.cached import CachedEmbedder
from lmaudit.backends.embed.openai import OpenAIEmbedder
from lmaudit.errors import BackendError
from lmaudit.provenance.cache import ResponseCache

SECRET = "sk-embed-test-SECRET-0123456789"
KEY_ENV = "LMAUDIT_TEST_EMBED_KEY"


def vector_for(text: str, dim: int) -> list[float]:
    """The fake model: a fixed, unnormalised vector per text."""
    rng = np.random.default_rng(sum(map(ord, text)))
    return (3.0 * rng.normal(size=dim)).tolist()


@dataclass
class Fake:
    seen: list[dict[str, Any]] = field(default_factory=list)
    failures: list[tuple[int, str]] = field(default_factory=list)
    reverse: bool = True
    dims: list[int] = field(default_factory=list)  # the next calls' vector lengths (then 8)


@pytest.fixture
def server() -> Iterator[tuple[str, Fake]]:
    fake = Fake()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            fake.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            if fake.failures:
                status, msg = fake.failures.pop(0)
                self._send(
                    status, {"error": {"message": msg}}, {"Retry-After": "0"} if status == 429 else None
                )
                return
            if self.path != "/v1/embeddings":
                self._send(404, {"error": {"message": "no such route"}})
                return
            dim = fake.dims.pop(0) if fake.dims else body.get("dimensions", 8)
            rows = [
                {"object": "embedding", "index": i, "embedding": vector_for(t, dim)}
                for i, t in enumerate(body["input"])
            ]
            if fake.reverse:
                rows = rows[::-1]
            self._send(200, {"object": "list", "data": rows, "model": body["model"]})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", fake
    finally:
        httpd.shutdown()
        httpd.server_close()


def make(url: str, **extra: Any) -> OpenAIEmbedder:
    cfg = {"base_url": url, "model": "fake-embed", "api_key_env": KEY_ENV, **extra}
    return OpenAIEmbedder(cfg, sleep=lambda s: None)


def test_embeds_in_order_normalised_with_the_key_from_the_environment(server, monkeypatch) -> None:
    url, fake = server
    monkeypatch.setenv(KEY_ENV, SECRET)
    e = make(url, batch_size=2)
    assert isinstance(e, EmbeddingBackend)
    texts = ["one", "two", "three"]
    v = e.embed(texts)
    assert v.dtype == np.float32 and v.shape == (3, 8)
    want = np.array([vector_for(t, 8) for t in texts])
    assert np.allclose(v, want / np.linalg.norm(want, axis=1, keepdims=True), atol=1e-6)
    assert [s["body"]["input"] for s in fake.seen] == [["one", "two"], ["three"]]
    assert all(s["auth"] == f"Bearer {SECRET}" for s in fake.seen)
    assert fake.seen[0]["body"]["encoding_format"] == "float" and "dimensions" not in fake.seen[0]["body"]
    assert SECRET not in repr(e) and SECRET not in json.dumps(e.identity)
    assert e.identity == {
        "backend": "openai-embeddings",
        "backend_version": 1,
        "model": "fake-embed",
        "revision": None,
        "dimensions": None,
    }
    d4 = make(url, dimensions=4)
    assert d4.embed(["x"]).shape == (1, 4) and fake.seen[-1]["body"]["dimensions"] == 4
    assert d4.identity != e.identity


def test_retries_then_fails_clearly_without_the_key(server, monkeypatch) -> None:
    url, fake = server
    monkeypatch.setenv(KEY_ENV, SECRET)
    fake.failures = [(429, "slow down"), (503, "busy")]
    assert make(url).embed(["a"]).shape == (1, 8)
    assert len(fake.seen) == 3
    fake.failures = [(400, f"bad request from key {SECRET}")]
    with pytest.raises(BackendError, match="HTTP 400") as err:
        make(url).embed(["a"])
    assert SECRET not in str(err.value)
    fake.failures = [(500, "down")] * 3
    with pytest.raises(BackendError, match="failed after 3 attempts"):
        make(url, max_retries=2).embed(["a"])
    with pytest.raises(BackendError, match="unknown field 'dimension'"):
        make(url, dimension=3)


def test_cached_through_the_shared_store(server, tmp_path: Path, monkeypatch) -> None:
    url, fake = server
    monkeypatch.delenv(KEY_ENV, raising=False)
    cached = CachedEmbedder(make(url), ResponseCache(tmp_path / "cache"), progress=False)
    first = cached.embed(["p", "q", "p"])
    n = len(fake.seen)
    assert fake.seen[0]["auth"] is None and fake.seen[0]["body"]["input"] == ["p", "q"]
    assert np.array_equal(cached.embed(["q", "p"]), first[[1, 0]])
    assert len(fake.seen) == n  # served from the cache


def test_vectors_of_another_length_are_refused_before_they_are_cached(server, tmp_path: Path) -> None:
    """A server whose vector length changes between calls: the first length known under the
    identity stands, the other batch is refused and not cached, and a later run against a
    server that answers right is served from the cache and asks only for what is missing."""
    url, fake = server
    cache = tmp_path / "cache"
    fake.dims = [8, 5]  # the first batch right, the second of another length
    cached = CachedEmbedder(make(url), ResponseCache(cache), batch_size=2, progress=False)
    with pytest.raises(BackendError, match=r"vectors of dimension 5 where this identity's are \[8\]"):
        cached.embed(["a", "bb", "ccc", "dddd"])  # longest first: [dddd, ccc] then [bb, a]
    asked = len(fake.seen)
    again = CachedEmbedder(make(url), ResponseCache(cache), batch_size=2, progress=False)
    out = again.embed(["a", "bb", "ccc", "dddd"])
    assert out.shape == (4, 8)
    assert [s["body"]["input"] for s in fake.seen[asked:]] == [["bb", "a"]]  # only the refused batch


def test_an_answer_past_max_answer_bytes_is_refused_naming_url_and_bound(server) -> None:
    url, fake = server
    texts = [f"text {i}" for i in range(300)]
    # 300 rows of 1500 numbers: about 9 MB as JSON, past a chat answer's 8 MiB bound, within an
    # embedder's 64 MiB default
    assert make(url, batch_size=300, dimensions=1500).embed(texts).shape == (300, 1500)
    with pytest.raises(BackendError) as info:
        make(url, batch_size=300, dimensions=1500, max_answer_bytes=2**20).embed(texts)
    assert str(info.value).startswith(f"POST {url}/embeddings: the answer is larger than 1,048,576 bytes")
    assert len(fake.seen) == 2  # refused, not retried
