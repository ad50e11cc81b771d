"""Two servers serving different models under one ``model.model`` never share cached answers.

Real HTTP servers on 127.0.0.1, each reporting its own model (``/v1/models``, an answer's
``model`` and ``system_fingerprint``). What the first server reported is recorded beside the
cache (:mod:`lmaudit.backends.openai.served`); a second server reporting another model is
refused before any cached answer is served, the same server is served from the cache, and
with no server at all a full cache still answers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from http_stub import JsonHandler, serving
from lmaudit.backends.base import LabelRequest, SampleRequest, derive_seed
from lmaudit.backends.cached import CachedBackend
from lmaudit.backends.openai.backend import OpenAIBackend
from lmaudit.errors import BackendError
from lmaudit.provenance.cache import ResponseCache
from lmaudit.provenance.compact import compact

MESSAGES = ({"role": "user", "content": "Is it A?"},)
LREQS = [
    LabelRequest(messages=MESSAGES, labels=("A", "B")),
    LabelRequest(messages=({"role": "user", "content": "Or B?"},), labels=("A", "B")),
]
SREQ = SampleRequest(messages=MESSAGES, n=2, seed=5)
TOP = {"A": 0.45, "B": 0.35, "Yes": 0.1, "No": 0.08, "C": 0.02}
WORDS = {"Yes": 2, "No": 3}
TEMPLATE = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"


@dataclass
class Server:
    """One fake server: the model it lists and answers with; what it was asked."""

    served: str
    answers_as: str | None = None  # an answer's "model" (None: the listed id)
    fingerprint: str | None = "fp-1"
    posts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextlib.contextmanager
def serve(server: Server) -> Iterator[str]:
    """The server on 127.0.0.1 while the block runs; yields its ``/v1`` base URL."""

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": server.served, "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with server.lock:
                server.posts += 1
            if self.path.endswith("/extras/tokenize"):  # one token per character, but Yes and No
                pieces = re.findall(r"Yes|No|.", body["input"], flags=re.S)
                self._send({"tokens": [1] + [WORDS[p] if p in WORDS else ord(p) + 10 for p in pieces]})
                return
            if self.path.endswith("/extras/detokenize"):
                back = {v: k for k, v in WORDS.items()}
                self._send({"text": "".join(back.get(t) or chr(t - 10) for t in body["tokens"] if t > 1)})
                return
            if not self.path.endswith("/chat/completions"):
                self._send({"detail": "Not Found"}, 404)
                return
            answer: dict[str, Any] = {"model": server.answers_as or server.served}
            if server.fingerprint is not None:
                answer["system_fingerprint"] = server.fingerprint
            if body.get("logprobs"):
                tops = [{"token": t, "logprob": math.log(p)} for t, p in TOP.items()]
                lp = {"content": [{"token": "A", "logprob": math.log(0.45), "top_logprobs": tops}]}
                choice = {"index": 0, "message": {"content": "A"}, "logprobs": lp}
            else:
                choice = {"index": 0, "message": {"content": f"{server.served}-{body.get('seed')}"}}
            self._send({**answer, "choices": [choice]})

    with serving(Handler) as port:
        yield f"http://127.0.0.1:{port}/v1"


def cached(url: str, root: Path, **cfg: Any) -> CachedBackend:
    """The backend under the default ``model.model``, through the cache at ``root``."""
    backend = OpenAIBackend({"base_url": url, "model": "default", "timeout_s": 5.0, **cfg})
    return CachedBackend(backend, ResponseCache(root), progress=False)


def ask(c: CachedBackend) -> tuple[list[dict[str, Any]], list[list[str]]]:
    labels = [r.to_json() for r in c.label_logprobs(LREQS, top_k=3)]
    return labels, [r.texts for r in c.sample([SREQ])]


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def filled(tmp_path: Path) -> Iterator[tuple[Path, Any, Server, str]]:
    """A cache filled by a server serving ``alpha``; yields the cache, its answers, the server, its URL."""
    alpha = Server("alpha")
    with serve(alpha) as url:
        answers = ask(cached(url, tmp_path / "cache"))
        assert alpha.posts == 4  # 2 label requests, 2 draws
        yield tmp_path / "cache", answers, alpha, url


SERVED = "served"  # the records' folder in a cache (lmaudit.backends.openai.served)
ALPHA = {"models": [{"id": "alpha"}], "model": "alpha", "system_fingerprint": "fp-1"}


def test_a_second_server_serving_another_model_is_refused_before_any_cached_answer(
    filled: tuple[Path, Any, Server, str],
) -> None:
    root, _, _, _ = filled
    before = files(root)
    beta = Server("beta")
    with serve(beta) as url:
        cache = ResponseCache(root)
        with pytest.raises(BackendError) as info:
            CachedBackend(OpenAIBackend({"base_url": url, "model": "default"}), cache, progress=False)
        msg = str(info.value)
        assert "\n" not in msg
        assert "reported models ['alpha'], model 'alpha'" in msg and "reports models ['beta']" in msg
        assert "set model.revision=" in msg and "another paths.cache" in msg
        # nothing of the first server's was served as the second's, nothing was stored
        assert beta.posts == 0 and cache.stats.hits == 0 and cache.stats.writes == 0
        assert files(root) == before
        # a revision naming the served weights is another identity: asked afresh, cached apart
        again = cached(url, root, revision="beta-weights")
        _, draws = ask(again)
        assert beta.posts == 4 and again.cache.stats.hits == 0
        assert draws == [[f"beta-{derive_seed(SREQ.seed, d)}" for d in range(SREQ.n)]]


def test_an_answer_from_another_model_is_refused_and_not_stored(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    alpha = Server("alpha")
    with serve(alpha) as url:
        cached(url, root).label_logprobs(LREQS[:1], top_k=3)
    # lists the same id but answers as another model (an alias repointed)
    moved = Server("alpha", answers_as="alpha-2")
    with serve(moved) as url:
        c = cached(url, root)
        with pytest.raises(BackendError, match=r"model 'alpha'.*reports .*model 'alpha-2'"):
            c.label_logprobs(LREQS, top_k=3)
        assert moved.posts == 1 and c.cache.stats.writes == 0


def test_the_same_server_again_is_served_from_the_cache(filled: tuple[Path, Any, Server, str]) -> None:
    root, answers, alpha, url = filled
    again = cached(url, root)
    assert ask(again) == answers
    assert alpha.posts == 4 and again.cache.stats.hits == 4 and again.cache.stats.writes == 0
    served = again.describe()["served"]
    assert served["recorded"] == ALPHA and served["reported"]["models"] == [{"id": "alpha"}]
    (record,) = (root / SERVED).iterdir()
    assert record.name == f"{again.digest}.json"


def test_no_server_at_all_with_a_full_cache_still_works(filled: tuple[Path, Any, Server, str]) -> None:
    root, answers, _, _ = filled
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # released: nothing listens there
    offline = cached(f"http://127.0.0.1:{port}/v1", root)
    assert ask(offline) == answers
    assert offline.cache.stats.hits == 4 and offline.cache.stats.writes == 0
    served = offline.describe()["served"]
    assert served["recorded"] == ALPHA and served["reported"]["models"] is None


def test_a_changed_fingerprint_alone_is_logged_not_refused(
    filled: tuple[Path, Any, Server, str], caplog: pytest.LogCaptureFixture
) -> None:
    root, _, _, _ = filled
    rebuilt = Server("alpha", fingerprint="fp-2")
    with serve(rebuilt) as url, caplog.at_level(logging.WARNING):
        c = cached(url, root)
        c.label_logprobs(
            [LabelRequest(messages=({"role": "user", "content": "new"},), labels=("A",))], top_k=3
        )
    assert rebuilt.posts == 1 and "system_fingerprint 'fp-2'" in caplog.text
    assert c.describe()["served"]["recorded"] == ALPHA


def test_the_record_survives_compaction_and_a_damaged_one_is_written_again(
    filled: tuple[Path, Any, Server, str], caplog: pytest.LogCaptureFixture
) -> None:
    root, answers, alpha, url = filled
    c = cached(url, root)
    ask(c)
    record = next((root / SERVED).iterdir())
    kept = record.read_bytes()
    compact(c.cache, keep=set(c.cache.used_keys))
    assert record.read_bytes() == kept and ask(cached(url, root)) == answers
    record.write_text(kept.decode().replace("alpha", "beta"))  # edited: no longer its sha256
    with caplog.at_level(logging.WARNING):
        c = cached(url, root)
        c.sample([SampleRequest(messages=MESSAGES, n=1, seed=99)])
    assert "does not match its sha256" in caplog.text and record.read_bytes() == kept
    assert alpha.posts == 5


def test_the_listing_names_the_configured_model_and_its_weights() -> None:
    from lmaudit.backends.openai.served import listed

    data = {"data": [{"id": "default", "root": "/w/qwen"}, {"id": "lora", "parent": "default"}]}
    assert listed(data, "default") == [{"id": "default", "root": "/w/qwen"}]
    assert listed(data, "other") == [{"id": "default", "root": "/w/qwen"}, {"id": "lora"}]
    assert listed({"data": []}, "default") is None and listed("<html>", "default") is None


def test_runs_against_two_servers_through_the_pipeline(make_cfg: Any, tmp_path: Path) -> None:
    """The measure stage: refused against a second server, byte for byte from the cache with none."""
    from lmaudit.pipeline import run

    common = ("study=draws", "model=openai", "study.n=2", "mlflow.enabled=false", "stage=measure")
    with serve(Server("alpha")) as url:
        run(make_cfg(*common, f"model.base_url={url}", name="first"))
    first = tmp_path / "first"
    audit = json.loads((first / "audit_record.json").read_text())
    assert audit["measure"]["backend"]["served"]["recorded"]["models"] == [{"id": "alpha"}]
    beta = Server("beta")
    with serve(beta) as url, pytest.raises(BackendError, match=r"reports models \['beta'\]"):
        run(make_cfg(*common, f"model.base_url={url}", name="second"))
    assert beta.posts == 0 and not (tmp_path / "second" / "measurements.jsonl").exists()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # released: nothing listens there
    run(make_cfg(*common, f"model.base_url=http://127.0.0.1:{port}/v1", name="offline"))
    offline = tmp_path / "offline"
    assert (offline / "measurements.jsonl").read_bytes() == (first / "measurements.jsonl").read_bytes()
    audit = json.loads((offline / "audit_record.json").read_text())
    assert audit["measure"]["backend"]["served"]["recorded"]["models"] == [{"id": "alpha"}]
