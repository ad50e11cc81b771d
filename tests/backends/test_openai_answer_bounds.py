"""A server's answer is read up to a bound (``max_answer_bytes``): one that declares or sends more
is refused in one line naming the URL and the bound, read no further, not retried and never
cached. Its JSON is decoded by the bounded reader: nesting past the bound or a lone UTF-16
surrogate is refused the same way. Real sockets throughout (the canned server of
``test_openai_backend`` and the ``openai_stub`` fixture)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_openai_backend import MESSAGES, Fake, make, serve

from cli_runs import assert_nothing_half_written, error_line, run_cli
from lmaudit.backends.base import SampleRequest
from lmaudit.backends.cached import CachedBackend
from lmaudit.backends.openai import client
from lmaudit.backends.openai.backend import OpenAIBackend
from lmaudit.backends.openai.config import OpenAIModelConfig
from lmaudit.errors import BackendError
from lmaudit.provenance.cache import ResponseCache
from stub_server import stub_model_args

REQ = SampleRequest(messages=MESSAGES, n=1, max_tokens=1, seed=3)


@pytest.fixture
def server() -> Iterator[tuple[Fake, str]]:
    fake = Fake()
    with serve(fake) as url:
        yield fake, url


def answer(content: str) -> bytes:
    return json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    ).encode()


def test_the_default_bound_is_a_few_megabytes_and_the_schema_says_the_same() -> None:
    assert client.MAX_ANSWER_BYTES == 8 * 2**20
    assert OpenAIModelConfig.max_answer_bytes == client.MAX_ANSWER_BYTES
    backend = OpenAIBackend({"base_url": "http://127.0.0.1:9/v1", "model": "toy"})
    assert backend.describe()["max_answer_bytes"] == client.MAX_ANSWER_BYTES


def test_an_answer_at_the_bound_is_read_and_one_byte_more_is_refused(
    server: tuple[Fake, str], tmp_path: Path
) -> None:
    fake, url = server
    body = answer("A")
    fake.raw = body
    (res,) = make(url, max_answer_bytes=len(body)).sample([REQ])
    assert res.texts == ["A"]
    fake.raw = answer("AB")  # one byte longer
    cached = CachedBackend(make(url, max_answer_bytes=len(body)), ResponseCache(tmp_path), progress=False)
    posts = len(fake.seen)
    with pytest.raises(BackendError) as info:
        cached.sample([REQ])
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"POST {url}/chat/completions: the answer is larger than {len(body):,} bytes")
    assert "(max_answer_bytes); refused, not cached" in message
    assert len(fake.seen) == posts + 1  # not retried
    assert not any(tmp_path.rglob("*.json"))  # nothing cached


def test_a_streamed_answer_past_the_bound_is_not_read_to_its_end(openai_stub, tmp_path: Path) -> None:
    state, url = openai_stub
    total = 256 * 2**20  # 256 MiB, made as it is sent

    def huge() -> Iterator[bytes]:
        yield b'{"choices": [{"index": 0, "message": {"content": "'
        chunk = b"x" * 2**20
        for _ in range(total // len(chunk)):
            yield chunk

    state.stream = huge
    backend = OpenAIBackend({"base_url": url, "model": "toy", "max_answer_bytes": 2**20, "timeout_s": 60})
    cached = CachedBackend(backend, ResponseCache(tmp_path), progress=False)
    with pytest.raises(BackendError, match=r"the answer is larger than 1,048,576 bytes \(more was sent\)"):
        cached.sample([REQ])
    # the client stopped reading: what the server got rid of is at most the bound and what
    # the sockets' buffers held, far from the whole answer
    assert state.sent < 64 * 2**20
    assert not any(tmp_path.rglob("*.json"))


def test_an_answer_declaring_more_than_the_bound_is_refused_before_reading(server: tuple[Fake, str]) -> None:
    fake, url = server
    fake.raw = answer("x" * 5000)
    with pytest.raises(BackendError, match=r"larger than 4,096 bytes \(it declares 5,0\d\d\)"):
        make(url, max_answer_bytes=4096).sample([REQ])


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (
            b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "arrays and objects nested more than 256 deep",
        ),
        (
            answer("A").replace(b'"A"', b'"\\ud800"'),
            "field 'choices[0].message.content' holds a lone UTF-16 surrogate",
        ),
    ],
    ids=["deep", "lone-surrogate"],
)
def test_an_answer_nested_too_deep_or_with_a_lone_surrogate_is_refused_and_not_cached(
    server: tuple[Fake, str], tmp_path: Path, raw: bytes, said: str
) -> None:
    fake, url = server
    fake.raw = raw
    cached = CachedBackend(make(url), ResponseCache(tmp_path), progress=False)
    with pytest.raises(BackendError) as info:
        cached.sample([REQ])
    assert str(info.value).startswith(
        f"POST {url}/chat/completions: HTTP 200 but the body is refused: {said}"
    )
    assert not any(tmp_path.rglob("*.json"))


def test_a_run_answered_past_the_bound_ends_in_one_line_naming_url_and_bound(
    openai_stub, tmp_path: Path
) -> None:
    state, url = openai_stub
    state.stream = lambda: iter([b'{"choices": [{"message": {"content": "', b"x" * 2**20, b'"}}]}'])
    out, cache = tmp_path / "run", tmp_path / "cache"
    proc = run_cli(
        "study=draws",
        *stub_model_args(url),
        "model.max_answer_bytes=65536",
        f"out_dir={out}",
        f"paths.cache={cache}",
        "mlflow.enabled=false",
        "progress=false",
    )
    assert proc.returncode == 1, proc.stderr  # what a backend refuses (docs/usage.md)
    line = error_line(proc)
    assert line.startswith(f"error: POST {url}/chat/completions: the answer is larger than 65,536 bytes")
    assert_nothing_half_written(out)
    assert not cache.exists() or not [
        p for p in cache.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")
    ]
