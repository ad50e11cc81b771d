"""OpenAIBackend against a real (tiny, canned) HTTP server on 127.0.0.1.

The server speaks just enough of the OpenAI chat/completions formats, a toy tokenize API
(one token per character) and can be told to fail the next requests with 429/503/400 or to
stall past the client timeout. Backoff is injected (``sleep``) so the tests stay fast.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from http_stub import serving
from lmaudit.backends.base import LabelBackend, LabelRequest, SampleRequest, SamplingBackend, derive_seed
from lmaudit.backends.cached import CachedBackend
from lmaudit.backends.openai.backend import UNVERIFIED, OpenAIBackend
from lmaudit.backends.openai.wire import (
    LabelResultWithVariants,
    first_position_top,
    read_labels,
    render_chat_template,
)
from lmaudit.errors import BackendError
from lmaudit.provenance.cache import ResponseCache
from lmaudit.provenance.digest import canonical_json

SECRET = "sk-test-0123456789abcdef-SECRET"
KEY_ENV = "LMAUDIT_TEST_OPENAI_KEY"
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] | trim }}</{{ m['role'] }}>\n"
    "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
)
# first-position alternatives the fake server returns: text -> probability
TOP = {"A": 0.6, "B": 0.25, " A": 0.05, "C": 0.04, "\n": 0.01}
MESSAGES = ({"role": "system", "content": "Answer A or B."}, {"role": "user", "content": "Is it A? "})


@dataclass
class Fake:
    """Shared state of the fake server: what it saw and what it should do next."""

    seen: list[dict[str, Any]] = field(default_factory=list)
    failures: list[tuple[int, dict[str, str], str]] = field(default_factory=list)  # status, headers, msg
    stall_next: int = 0
    stall_s: float = 0.0
    tokenize: str | None = "llama-cpp-python"  # which tokenize API exists (None: none)
    gets: list[str] = field(default_factory=list)
    models_status: int = 200  # what GET /v1/models answers
    top: dict[str, Any] | None = None  # top logprobs to send as they are (None: TOP's)
    filtered: bool = False  # draws answered as hosted APIs answer a refusal: content null
    raw: bytes | None = None  # a chat answer's body, sent as it is
    lock: threading.Lock = field(default_factory=threading.Lock)


def _make_handler(fake: Fake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep pytest output clean
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

        def do_GET(self) -> None:
            with fake.lock:
                fake.gets.append(self.path)
            if self.path == "/v1/models" and fake.models_status == 200:
                self._send(200, {"object": "list", "data": [{"id": "toy", "object": "model"}]})
            else:
                self._send(fake.models_status, {"error": {"message": "no", "type": "test"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with fake.lock:
                fake.seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
                failure = fake.failures.pop(0) if fake.failures else None
                stall = fake.stall_next > 0
                fake.stall_next -= 1 if stall else 0
            if stall:
                time.sleep(fake.stall_s)
            if failure is not None and failure[0] == -1:
                self.close_connection = True
                return
            if failure is not None:
                status, headers, msg = failure
                self._send(status, {"error": {"message": msg, "type": "test"}}, headers)
                return
            route = {
                "/v1/chat/completions": self._chat,
                "/v1/completions": self._completions,
                "/extras/tokenize": self._xtokenize,
                "/extras/detokenize": self._xdetokenize,
                "/tokenize": self._tokenize,
            }.get(self.path)
            if route is None:
                self._send(404, {"detail": "Not Found"})
                return
            route(body)

        def _chat(self, body: dict[str, Any]) -> None:
            if fake.raw is not None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(fake.raw)))
                self.end_headers()
                self.wfile.write(fake.raw)
                return
            if body.get("logprobs"):
                tops = [
                    {"token": t, "logprob": math.log(p), "id": 100 + i}
                    for i, (t, p) in enumerate(TOP.items())
                ][: body["top_logprobs"]]
                if fake.top is not None:
                    tops = [
                        {"token": t, "logprob": v, "id": 100 + i} for i, (t, v) in enumerate(fake.top.items())
                    ]
                lp = {"content": [{"token": "A", "logprob": math.log(0.6), "top_logprobs": tops}]}
                self._send(200, {"choices": [{"index": 0, "message": {"content": "A"}, "logprobs": lp}]})
            elif fake.filtered:
                message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
                self._send(
                    200, {"choices": [{"index": 0, "message": message, "finish_reason": "content_filter"}]}
                )
            else:
                text = f"draw-{body.get('seed')}"
                self._send(
                    200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
                )

        def _completions(self, body: dict[str, Any]) -> None:
            if body.get("logprobs"):
                tops = {t: math.log(p) for t, p in list(TOP.items())[: body["logprobs"]]}
                lp = {"tokens": ["A"], "token_logprobs": [math.log(0.6)], "top_logprobs": [tops]}
                self._send(200, {"choices": [{"index": 0, "text": "A", "logprobs": lp}]})
            else:
                self._send(200, {"choices": [{"index": 0, "text": f"draw-{body.get('seed')}"}]})

        def _xtokenize(self, body: dict[str, Any]) -> None:
            if fake.tokenize != "llama-cpp-python":
                self._send(404, {"detail": "Not Found"})
                return
            self._send(200, {"tokens": [1] + [ord(c) for c in body["input"]]})  # BOS + one per char

        def _xdetokenize(self, body: dict[str, Any]) -> None:
            self._send(200, {"text": "".join(chr(t) for t in body["tokens"] if t > 1)})

        def _tokenize(self, body: dict[str, Any]) -> None:
            if fake.tokenize != "llama.cpp" or "content" not in body:
                self._send(404, {"detail": "Not Found"})
                return
            self._send(200, {"tokens": [{"id": ord(c), "piece": c} for c in body["content"]]})

    return Handler


@contextlib.contextmanager
def serve(fake: Fake) -> Iterator[str]:
    """The fake server on 127.0.0.1 while the block runs; yields its ``/v1`` base URL."""
    with serving(_make_handler(fake)) as port:
        yield f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def server() -> Iterator[tuple[Fake, str]]:
    fake = Fake()
    with serve(fake) as url:
        yield fake, url


class Sleeps(list[float]):
    def __call__(self, s: float) -> None:
        self.append(s)


def make(base_url: str, sleeps: Sleeps | None = None, **cfg: Any) -> OpenAIBackend:
    conf = {"base_url": base_url, "model": "toy", "api_key_env": KEY_ENV, "backoff_base_s": 0.001,
            "backoff_cap_s": 0.01, "timeout_s": 5.0, **cfg}  # fmt: skip
    return OpenAIBackend(conf, sleep=sleeps if sleeps is not None else Sleeps())


LREQ = LabelRequest(messages=MESSAGES, labels=("A", "B"))


# --- retries -------------------------------------------------------------------------------


def test_429_with_retry_after_then_success(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.failures = [(429, {"Retry-After": "0"}, "slow down")] * 2
    sleeps = Sleeps()
    (res,) = make(url, sleeps).label_logprobs([LREQ])
    assert len(fake.seen) == 3
    assert sleeps == [0.0, 0.0]  # Retry-After honoured, no jitter added
    assert res.probs["A"] == pytest.approx(0.6)


def test_503_backoff_then_success(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.failures = [(503, {}, "overloaded")] * 3
    sleeps = Sleeps()
    (res,) = make(url, sleeps).label_logprobs([LREQ])
    assert len(fake.seen) == 4 and len(sleeps) == 3
    # full jitter: uniform(0, min(cap, base * 2**attempt))
    assert all(0.0 <= s <= min(0.01, 0.001 * 2**i) for i, s in enumerate(sleeps))
    assert res.probs["B"] == pytest.approx(0.25)


def test_timeout_is_retried(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.stall_next, fake.stall_s = 1, 1.0
    (res,) = make(url, timeout_s=0.3).label_logprobs([LREQ])
    assert res.probs["A"] == pytest.approx(0.6)
    assert len(fake.seen) == 2


def test_retries_exhausted(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.failures = [(503, {}, "still overloaded")] * 10
    with pytest.raises(BackendError, match=r"after 3 attempts.*503.*still overloaded"):
        make(url, max_retries=2).label_logprobs([LREQ])
    assert len(fake.seen) == 3


def test_connection_dropped_mid_answer_is_retried(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.failures = [(-1, {}, "")]  # the server closes the connection without answering
    sleeps = Sleeps()
    (res,) = make(url, sleeps).label_logprobs([LREQ])
    assert len(fake.seen) == 2 and len(sleeps) == 1
    assert res.probs["A"] == pytest.approx(0.6)


def test_400_fails_at_once_with_server_message(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.failures = [(400, {}, "model 'toy' does not support logprobs")]
    sleeps = Sleeps()
    with pytest.raises(BackendError, match=r"HTTP 400: model 'toy' does not support logprobs"):
        make(url, sleeps).label_logprobs([LREQ])
    assert len(fake.seen) == 1 and sleeps == []


# --- the API key ----------------------------------------------------------------------------


def test_key_only_in_authorization_header(
    server: tuple[Fake, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake, url = server
    monkeypatch.setenv(KEY_ENV, SECRET)
    backend = make(url)
    # servers echo keys in error messages; retries are logged
    fake.failures = [
        (503, {"Retry-After": "0"}, f"bad key {SECRET}"),
        (401, {}, f"Incorrect API key {SECRET}"),
    ]
    with caplog.at_level(logging.DEBUG), pytest.raises(BackendError) as info:
        backend.label_logprobs([LREQ])
    assert "HTTP 401" in str(info.value) and "Incorrect API key" in str(info.value)
    backend.sample([SampleRequest(messages=MESSAGES, n=1)])
    for req in fake.seen:
        assert req["headers"]["Authorization"] == f"Bearer {SECRET}"
        assert SECRET not in json.dumps(req["body"])
    leaks = [
        str(info.value),
        repr(info.value),
        repr(backend),
        str(backend),
        canonical_json(backend.identity),
        caplog.text,
        repr(vars(backend)),
    ]
    assert caplog.text  # the retry was logged
    assert not [s for s in leaks if SECRET in s]


def test_no_key_no_authorization_header(server: tuple[Fake, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fake, url = server
    monkeypatch.delenv(KEY_ENV, raising=False)
    make(url).label_logprobs([LREQ])
    assert "Authorization" not in fake.seen[0]["headers"]


# --- label read-out --------------------------------------------------------------------------


def test_chat_labels_present_and_absent(server: tuple[Fake, str]) -> None:
    fake, url = server
    backend = make(url, top_logprobs=4)
    present, absent = backend.label_logprobs(
        [LREQ, LabelRequest(messages=MESSAGES, labels=("A", "Z"))], top_k=3
    )
    body = fake.seen[0]["body"]
    assert fake.seen[0]["path"] == "/v1/chat/completions"
    assert body["logprobs"] is True and body["top_logprobs"] == 4 and body["max_tokens"] == 1
    assert body["messages"] == [dict(m) for m in MESSAGES]
    assert present.probs == pytest.approx({"A": 0.6, "B": 0.25})
    assert present.other == pytest.approx(0.15)
    assert present.label_token_ids == {"A": 100, "B": 101}
    assert [t for t, _ in present.top_k] == ["A", "B", " A"]
    assert present.top_k[0][1] == pytest.approx(0.6)
    # "Z" is not in the top-k: probability 0, its mass stays in other (conservative)
    assert absent.probs == pytest.approx({"A": 0.6, "Z": 0.0})
    assert absent.other == pytest.approx(0.4)
    assert absent.label_token_ids["Z"] == -1
    assert type(present).from_json(present.to_json()) == present


def test_space_variants_only_when_configured(server: tuple[Fake, str]) -> None:
    _, url = server
    (plain,) = make(url).label_logprobs([LREQ])
    assert plain.probs["A"] == pytest.approx(0.6)
    (res,) = make(url, label_space_variants=True).label_logprobs([LREQ])
    assert isinstance(res, LabelResultWithVariants)
    assert res.probs["A"] == pytest.approx(0.65)
    assert res.matched_variants == {"A": ["A", " A"], "B": ["B"]}
    assert res.to_json()["matched_variants"]["A"] == ["A", " A"]


def test_completions_mode_renders_template(server: tuple[Fake, str]) -> None:
    fake, url = server
    backend = make(url, endpoint="completions", chat_template=TEMPLATE, top_logprobs=5)
    (res,) = backend.label_logprobs([LREQ])
    body = fake.seen[0]["body"]
    assert fake.seen[0]["path"] == "/v1/completions"
    assert body["prompt"] == "<system>Answer A or B.</system>\n<user>Is it A?</user>\n<assistant>"
    assert body["logprobs"] == 5 and body["max_tokens"] == 1 and body["temperature"] == 0
    assert res.probs == pytest.approx({"A": 0.6, "B": 0.25})
    assert res.label_token_ids == {"A": -1, "B": -1}  # legacy format carries no ids


@pytest.mark.parametrize(
    ("top", "refusal"),
    [
        ({"A": 0.5, "B": math.log(0.2)}, r"logprob 0\.5 for token 'A', not a log-probability"),
        ({"A": math.inf}, r"logprob inf for token 'A', not a log-probability"),
        ({"A": math.nan}, r"logprob nan for token 'A', not a log-probability"),
        ({"A": "-0.1"}, r"sent '-0\.1' as the logprob of token 'A', not a number"),
        ({"A": math.log(0.7), "B": math.log(0.6)}, r"probabilities summing to 1\.3 > 1"),
    ],
)
def test_an_answer_that_is_no_distribution_is_refused_and_never_cached(
    server: tuple[Fake, str], tmp_path: Path, top: dict[str, Any], refusal: str
) -> None:
    fake, url = server
    fake.top = top
    cached = CachedBackend(make(url, top_logprobs=4), ResponseCache(tmp_path), progress=False)
    with pytest.raises(BackendError, match=refusal):
        cached.label_logprobs([LREQ], top_k=3)
    asked = len(fake.seen)
    fake.top = None  # the server mended: the request is asked again, not served a bad answer
    (res,) = cached.label_logprobs([LREQ], top_k=3)
    assert len(fake.seen) == asked + 1
    assert res.probs == pytest.approx({"A": 0.6, "B": 0.25})


def test_rounding_above_zero_and_null_logprobs_are_read_as_probabilities(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.top = {"A": 3e-7, "B": None}  # float32 rounding of p = 1; llama.cpp writes -inf as null
    (res,) = make(url, top_logprobs=4).label_logprobs([LREQ], top_k=3)
    assert res.probs == {"A": 1.0, "B": 0.0} and res.other == 0.0


def test_a_filtered_draw_is_recorded_as_a_refusal_and_never_cached_as_an_answer(
    server: tuple[Fake, str], tmp_path: Path
) -> None:
    fake, url = server
    fake.filtered = True
    cached = CachedBackend(make(url), ResponseCache(tmp_path), progress=False)
    req = SampleRequest(messages=MESSAGES, n=2, seed=3)
    (res,) = cached.sample([req])
    assert res.texts == ["", ""] and res.refused
    assert res.refusals == ("content_filter: I can't help with that.",) * 2
    assert dict(cached.refusals) == {"content_filter": 2}
    assert cached.cache.stats.writes == 0
    fake.filtered = False  # asked again: nothing was cached
    seen = len(fake.seen)
    (res,) = cached.sample([req])
    assert len(fake.seen) == seen + 2
    assert res.texts == [f"draw-{derive_seed(3, i)}" for i in range(2)] and not res.refused


@pytest.mark.parametrize(
    ("raw", "refusal"),
    [
        (b'{"choices": ["A"]}', r"choices\[0\] is str 'A', not an object"),
        (b'{"choices": "A"}', "has no choices"),
        (
            '{"choices": [{"message": {"content": "caf\u00e9"}}]}'.encode("latin-1"),
            r"the body is not UTF-8 \(byte 41",
        ),
        (b"<html>busy</html>", r"the body is not JSON: '<html>busy</html>'"),
    ],
)
def test_a_malformed_answer_is_one_backend_error_and_never_cached(
    server: tuple[Fake, str], tmp_path: Path, raw: bytes, refusal: str
) -> None:
    fake, url = server
    fake.raw = raw
    cached = CachedBackend(make(url), ResponseCache(tmp_path), progress=False)
    with pytest.raises(BackendError, match=refusal):
        cached.sample([SampleRequest(messages=MESSAGES, n=1, seed=3)])
    assert not any(tmp_path.rglob("*.json"))


def test_parse_functions() -> None:
    choice = {"logprobs": {"top_logprobs": [{"B": math.log(0.3), "A": math.log(0.5)}]}}
    entries = first_position_top(choice)
    assert [e[0] for e in entries] == ["A", "B"]
    res = read_labels(entries, ("A", "B", "C"), top_k=10)
    assert res.probs == pytest.approx({"A": 0.5, "B": 0.3, "C": 0.0}) and res.other == pytest.approx(0.2)
    with pytest.raises(BackendError, match="no logprobs"):
        first_position_top({"text": "A"})


# --- sampling ----------------------------------------------------------------------------------


def test_sampling_one_request_per_draw_with_derived_seeds(server: tuple[Fake, str]) -> None:
    fake, url = server
    reqs = [
        SampleRequest(messages=MESSAGES, n=3, temperature=0.7, top_p=0.9, max_tokens=4, seed=11),
        SampleRequest(messages=MESSAGES, n=2, seed=12),
    ]
    out = make(url).sample(reqs)
    seeds = [derive_seed(11, i) for i in range(3)] + [derive_seed(12, i) for i in range(2)]
    assert [r["body"]["seed"] for r in fake.seen] == seeds
    assert [len(r.texts) for r in out] == [3, 2]
    assert out[0].texts + out[1].texts == [f"draw-{s}" for s in seeds]
    first = fake.seen[0]["body"]
    assert (first["temperature"], first["top_p"], first["max_tokens"], first["n"]) == (0.7, 0.9, 4, 1)


def test_sampling_concurrent_keeps_draw_order(server: tuple[Fake, str]) -> None:
    fake, url = server
    out = make(url, endpoint="completions", chat_template=TEMPLATE, max_concurrency=4).sample(
        [SampleRequest(messages=MESSAGES, n=6, seed=5)]
    )
    assert out[0].texts == [f"draw-{derive_seed(5, i)}" for i in range(6)]
    assert sorted(r["body"]["seed"] for r in fake.seen) == sorted(derive_seed(5, i) for i in range(6))


# --- gate G1 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["llama-cpp-python", "llama.cpp"])
def test_g1_via_tokenize_endpoint(server: tuple[Fake, str], dialect: str) -> None:
    fake, url = server
    fake.tokenize = dialect
    backend = make(url, endpoint="completions", chat_template=TEMPLATE)
    pieces = backend.check_single_token(LabelRequest(messages=MESSAGES, labels=("A", "Yes")))
    assert pieces == {"A": ["A"], "Yes": ["Y", "e", "s"]}


def test_g1_unverified_fails_the_gate(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.tokenize = None
    pieces = make(url, chat_template=TEMPLATE).check_single_token(LREQ)
    assert set(pieces) == {"A", "B"}
    for toks in pieces.values():
        assert toks[0] == UNVERIFIED and len(toks) != 1  # never passes "exactly one token"
    # chat mode without a template and no /apply-template: unverified as well
    assert make(url).check_single_token(LREQ)["A"][0] == UNVERIFIED


# --- config and identity -------------------------------------------------------------------------


def test_identity_and_protocols() -> None:
    b = make("http://user:pw@example.invalid:8000/v1", revision="2025-01")
    assert isinstance(b, LabelBackend) and isinstance(b, SamplingBackend) and b.reads_meta is False
    assert b.identity == {
        "backend": "openai",
        "backend_version": 1,
        "model": "toy",
        "endpoint": "chat",
        "revision": "2025-01",
        "top_logprobs": 20,
        "label_space_variants": False,
    }
    assert "pw" not in repr(b)
    c = make("http://elsewhere:1/v1", endpoint="completions", chat_template=TEMPLATE, revision="2025-01")
    assert c.identity["chat_template_sha256"] and c.identity["endpoint"] == "completions"
    same_elsewhere = make("http://other-host:9/v1", revision="2025-01")
    assert same_elsewhere.identity == b.identity  # the base_url is not part of identity


def test_config_errors() -> None:
    with pytest.raises(BackendError, match="'chat_template' is required"):
        OpenAIBackend({"base_url": "http://x/v1", "model": "m", "endpoint": "completions"})
    with pytest.raises(BackendError, match="'base_url' is required"):
        OpenAIBackend({"model": "m"})
    with pytest.raises(BackendError, match="'endpoint'"):
        OpenAIBackend({"base_url": "http://x/v1", "model": "m", "endpoint": "embeddings"})


def test_render_chat_template_like_transformers() -> None:
    out = render_chat_template(TEMPLATE, MESSAGES, bos_token="<bos>")
    assert out.startswith("<bos><system>") and out.endswith("<assistant>")
    with pytest.raises(BackendError, match="failed to render"):
        make("http://x/v1", endpoint="completions", chat_template="{{ raise_exception('no') }}")._render(
            MESSAGES
        )
