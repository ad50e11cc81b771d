"""Waits, deadlines, unreachable servers and credentials in messages, against real sockets.

The canned server of ``test_openai_backend`` answers on 127.0.0.1; an unreachable server is a
port that was bound and released (nothing listens there). Waits go through an injected
``sleep`` that advances an injected clock, so what is asserted is the planned pauses, not
wall-clock time.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from test_openai_backend import KEY_ENV, LREQ, MESSAGES, TEMPLATE, Fake, serve

from lmaudit.backends.base import LabelRequest
from lmaudit.backends.openai.backend import OpenAIBackend
from lmaudit.backends.openai.config import OpenAIModelConfig
from lmaudit.errors import BackendError, ServerUnreachable


class VirtualTime:
    """``sleep`` that records each pause and advances ``clock`` by it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s

    def clock(self) -> float:
        return self.now


def make(base_url: str, vt: VirtualTime, **cfg: Any) -> OpenAIBackend:
    conf = {"base_url": base_url, "model": "toy", "api_key_env": KEY_ENV, "timeout_s": 5.0, **cfg}
    return OpenAIBackend(conf, sleep=vt.sleep, clock=vt.clock)


@pytest.fixture
def server() -> Iterator[tuple[Fake, str]]:
    fake = Fake()
    with serve(fake) as url:
        yield fake, url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- item: waits are capped, requests have a deadline -----------------------------------------


def test_retry_after_is_capped_at_backoff_cap(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.failures = [(429, {"Retry-After": "86400"}, "come back tomorrow")] * 3
    vt = VirtualTime()
    (res,) = make(url, vt, backoff_cap_s=2.0, max_retries=5).label_logprobs([LREQ])
    assert vt.sleeps == [2.0, 2.0, 2.0]  # never the day the server asked for
    assert res.probs["A"] == pytest.approx(0.6)


def test_http_date_retry_after_is_capped_too(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.failures = [(503, {"Retry-After": "Fri, 31 Dec 2100 23:59:59 GMT"}, "maintenance")]
    vt = VirtualTime()
    make(url, vt, backoff_cap_s=1.5).label_logprobs([LREQ])
    assert vt.sleeps == [1.5]


def test_request_deadline_bounds_retries(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.failures = [(429, {"Retry-After": "86400"}, "come back tomorrow")] * 100
    vt = VirtualTime()
    backend = make(url, vt, backoff_cap_s=30.0, max_retries=50, request_deadline_s=100.0)
    with pytest.raises(BackendError, match=r"deadline \(request_deadline_s=100\).*429.*come back tomorrow"):
        backend.label_logprobs([LREQ])
    assert vt.sleeps == [30.0, 30.0, 30.0]  # a fourth pause would pass the deadline
    assert sum(vt.sleeps) <= 100.0
    assert len(fake.seen) == 4


def test_deadline_field_in_schema_and_validated() -> None:
    assert OpenAIModelConfig.request_deadline_s == 600.0
    with pytest.raises(BackendError, match="request_deadline_s > 0"):
        make("http://127.0.0.1:1/v1", VirtualTime(), request_deadline_s=0)


# --- item: an unreachable server fails fast, once, before any measurement ---------------------


def test_unreachable_server_fails_once_with_redacted_url() -> None:
    port = free_port()
    vt = VirtualTime()
    backend = make(f"http://user:hunter2@127.0.0.1:{port}/v1", vt, max_retries=5)
    with pytest.raises(
        ServerUnreachable, match=rf"cannot reach http://\*\*\*@127\.0\.0\.1:{port}/v1"
    ) as info:
        backend.label_logprobs([LREQ])
    assert "hunter2" not in str(info.value)
    assert vt.sleeps == []  # not retried
    with pytest.raises(ServerUnreachable, match="cannot reach"):
        backend.check_server()


def test_unreachable_server_fails_gate_g1_instead_of_blaming_labels() -> None:
    vt = VirtualTime()
    for cfg in ({}, {"endpoint": "completions", "chat_template": TEMPLATE}):
        backend = make(f"http://127.0.0.1:{free_port()}/v1", vt, **cfg)
        with pytest.raises(ServerUnreachable, match="cannot reach"):
            backend.check_single_token(LabelRequest(messages=MESSAGES, labels=("A", "B")))
    assert vt.sleeps == []


def test_unknown_host_fails_fast() -> None:
    vt = VirtualTime()
    with pytest.raises(ServerUnreachable, match=r"cannot reach http://no-such-host\.invalid/v1"):
        make("http://no-such-host.invalid/v1", vt).label_logprobs([LREQ])
    assert vt.sleeps == []


def test_server_checked_once_before_first_request(server: tuple[Fake, str]) -> None:
    fake, url = server
    backend = make(url, VirtualTime())
    backend.label_logprobs([LREQ, LREQ])
    assert fake.gets == ["/v1/models"]
    assert len(fake.seen) == 2


def test_rejected_credentials_stop_before_measuring(
    server: tuple[Fake, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = server
    fake.models_status = 401
    monkeypatch.setenv(KEY_ENV, "sk-hidden-123")
    with pytest.raises(BackendError, match=r"refused the credentials \(HTTP 401") as info:
        make(url, VirtualTime()).label_logprobs([LREQ])
    assert fake.seen == [] and "sk-hidden-123" not in str(info.value)


def test_server_without_models_endpoint_is_still_used(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.models_status = 404
    (res,) = make(url, VirtualTime()).label_logprobs([LREQ])
    assert res.probs["B"] == pytest.approx(0.25)


# --- item: URLs with credentials never leave the backend unredacted ----------------------------


def test_credentials_in_url_redacted_everywhere(
    server: tuple[Fake, str], caplog: pytest.LogCaptureFixture
) -> None:
    fake, url = server
    host = url.split("://", 1)[1]
    secret_url = f"http://alice:pa55word@{host}"
    fake.failures = [
        (503, {}, f"upstream {secret_url} overloaded"),
        (400, {}, f"bad request to {secret_url}"),
    ]
    backend = make(secret_url, VirtualTime(), backoff_cap_s=0.0)
    with caplog.at_level(logging.DEBUG), pytest.raises(BackendError) as info:
        backend.label_logprobs([LREQ])
    assert "HTTP 400" in str(info.value)
    texts = [str(info.value), repr(backend), json.dumps(backend.describe()), caplog.text]
    assert caplog.text and all("pa55word" not in t for t in texts)
    assert backend.describe()["base_url"] == f"http://***@{host}"
    assert fake.seen[0]["headers"]["Authorization"].startswith("Basic ")  # the server still gets them


# --- item: the deadline covers the body, however slowly it arrives -----------------------------


class _Drip(BaseHTTPRequestHandler):
    """Answers 200 at once, then sends its JSON body one byte every 50 ms (each socket read well
    inside timeout_s): on POST, or with ``drip_get`` on GET /models too."""

    drip_get = False

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, body: Any, drip: bool) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            for i in range(len(data)) if drip else ():
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                time.sleep(0.05)
            if not drip:
                self.wfile.write(data)
        except OSError:  # the client gave up and closed the connection
            pass

    def do_GET(self) -> None:
        self._answer({"object": "list", "data": [{"id": "toy", "object": "model"}]}, self.drip_get)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        tops = [{"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -3.0}]
        self._answer(
            {"choices": [{"message": {"content": "A"}, "logprobs": {"content": [{"top_logprobs": tops}]}}]},
            True,
        )


class _DripAll(_Drip):
    drip_get = True


@pytest.mark.parametrize(
    ("handler", "request_line"), [(_Drip, "POST"), (_DripAll, "GET")], ids=["answer", "reachability check"]
)
def test_a_body_sent_a_byte_at_a_time_is_cut_off_at_the_request_deadline(
    handler: type[_Drip], request_line: str
) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        conf = {
            "base_url": url,
            "model": "toy",
            "timeout_s": 5.0,
            "request_deadline_s": 0.5,
            "max_retries": 2,
        }
        with pytest.raises(
            BackendError,
            match=rf"^{request_line} .* gave up at its deadline \(request_deadline_s=0\.5\): HTTP 200, "
            r"the body still arriving \(\d+ bytes read\)",
        ):
            OpenAIBackend(conf).label_logprobs([LREQ])
    finally:
        httpd.shutdown()
        httpd.server_close()
