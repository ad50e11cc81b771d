"""Credentials in ``model.base_url`` against a server that echoes the Authorization header it
got: the Basic header's base64 form and the password never reach a message, a sweep's job
records or its failure summary; URL credentials and an API key together are refused before any
request; a misspelt key quoting a URL is masked."""

from __future__ import annotations

import base64
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_openai_backend import KEY_ENV, LREQ, Fake, serve

from http_stub import JsonHandler, serving
from lmaudit.backends.openai.backend import OpenAIBackend
from lmaudit.errors import BackendError
from lmaudit.provenance.redact import redact_text

REPO = Path(__file__).resolve().parents[2]
USER, PASSWORD = "alice", "s3cret-Pa55"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()  # what "Basic ..." carries


def _leaks(text: str) -> list[str]:
    return [s for s in (TOKEN, PASSWORD) if s in text]


class _Echo(JsonHandler):
    """Lists model ``toy``; refuses every POST quoting the Authorization header it got, whole
    and as its bare credentials."""

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "toy", "object": "model"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        got = str(self.headers.get("Authorization"))
        bare = got.split(" ", 1)[-1]
        self._send(
            {"error": {"message": f"rejected header 'Authorization: {got}' (credentials {bare})"}}, 400
        )


@pytest.fixture
def echo() -> Iterator[str]:
    """The echoing server's base URL with the credentials in it."""
    with serving(_Echo) as port:
        yield f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/v1"


def _backend(url: str) -> OpenAIBackend:
    return OpenAIBackend({"base_url": url, "model": "toy", "api_key_env": KEY_ENV, "max_retries": 0})


def test_an_echoed_basic_header_is_masked_in_the_error_and_the_log(
    echo: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with caplog.at_level(logging.DEBUG), pytest.raises(BackendError, match="HTTP 400") as info:
        _backend(echo).label_logprobs([LREQ])
    message = str(info.value)
    assert "Authorization: Basic ***" in message and "(credentials ***)" in message
    assert _leaks(message) == [] and _leaks(caplog.text) == []


def test_url_credentials_and_an_api_key_together_are_refused_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = Fake()
    with serve(fake) as url:
        monkeypatch.setenv(KEY_ENV, "sk-live-key-123")
        secret_url = url.replace("http://", f"http://{USER}:{PASSWORD}@")
        with pytest.raises(BackendError, match=r"credentials in the URL .* and an API key in") as info:
            _backend(secret_url).label_logprobs([LREQ])
    assert fake.seen == [] and fake.gets == []  # not one request: neither header was dropped
    assert _leaks(str(info.value)) == [] and "sk-live-key-123" not in str(info.value)
    assert f"${KEY_ENV}" in str(info.value)


def test_quoted_authorization_values_are_masked_in_any_text() -> None:
    text = f"server said: Authorization: Basic {TOKEN}; also bearer sk-abcdef123456"
    assert redact_text(text) == "server said: Authorization: Basic ***; also bearer ***"
    # words after "Basic" that are no credentials stay
    assert redact_text("Basic instructions apply") == "Basic instructions apply"


def _run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env_args = [sys.executable, "run.py", *args]
    return subprocess.run(env_args, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_a_sweep_against_an_echoing_server_leaks_no_credentials(
    echo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    proc = _run(
        "-m",
        "study=draws",
        "model=openai",
        f"model.base_url={echo}",
        "model.model=toy",
        "model.max_retries=0",
        "run_name=one,two",
        f"paths.results={tmp_path / 'results'}",
        f"paths.cache={tmp_path / 'cache'}",
        f"paths.mlruns={tmp_path / 'mlruns'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        "progress=false",
    )
    assert proc.returncode != 0
    summary = proc.stdout.splitlines()[-1]
    assert summary.startswith("sweep: 2 of 2 jobs failed") and "Basic ***" in summary, proc.stdout[-2000:]
    records = [p.read_text() for p in sorted((tmp_path / "sweep/jobs").glob("*.json"))]
    assert len(records) == 2 and all("HTTP 400" in r for r in records)
    for text in (proc.stdout, proc.stderr, *records):
        assert _leaks(text) == [], text[-2000:]


def test_a_misspelt_key_quoting_a_url_is_masked() -> None:
    proc = _run("model=openai", f"model.base_ur=http://{USER}:{PASSWORD}@127.0.0.1:9/v1")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith(
        "error: model.base_ur=http://***@127.0.0.1:9/v1: 'model' has no key 'base_ur' (keys: "
    )
    assert line.endswith("; did you mean model.base_url?") and "\n" not in line
