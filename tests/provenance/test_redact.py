"""Credentials never survive redaction; everything else about a URL does."""

from __future__ import annotations

import pytest

from lmaudit.provenance.redact import SECRET_PARAMS, redact_config, redact_text, redact_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:password@host/v1", "http://***@host/v1"),
        ("http://user:password@host:8000/v1", "http://***@host:8000/v1"),
        ("https://TOKEN@github.com/o/r.git", "https://***@github.com/o/r.git"),
        ("http://u:p@[::1]:8000/v1", "http://***@[::1]:8000/v1"),
        ("http://u:p%40ss@h/v1", "http://***@h/v1"),
        ("http://u:pa#ss@host/v1", "http://***@host/v1"),  # raw '#' inside the password
        ("http://u:pa?ss@host:9/v1", "http://***@host:9/v1"),
        ("https://h/v1?api_key=abc&model=x", "https://h/v1?api_key=***&model=x"),
        ("https://h/v1?Token=abc#frag", "https://h/v1?Token=***#frag"),
        ("https://h/p?SIG=1&sig=2&signature=3", "https://h/p?SIG=***&sig=***&signature=***"),
        ("https://h/p?api%5Fkey=1", "https://h/p?api%5Fkey=***"),
        ("https://a:b@h:1/p/q?x=1&secret=s&y=2", "https://***@h:1/p/q?x=1&secret=***&y=2"),
        ("http://[::1:8000/v1?key=1", "http://[::1:8000/v1?key=***"),  # unparseable: by hand
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


@pytest.mark.parametrize(
    "text",
    [
        "http://127.0.0.1:8000/v1",
        "https://h/v1?model=x&keyword=y&tokens=3",  # names that merely contain a secret word
        "http://host/a/@scope/pkg",  # '@' in the path is not userinfo
        "user:password@host",  # no scheme: not a URL
        "not a url",
        "",
    ],
)
def test_unchanged(text: str) -> None:
    assert redact_url(text) == text


@pytest.mark.parametrize("name", sorted(SECRET_PARAMS))
def test_every_secret_parameter_any_case(name: str) -> None:
    for variant in (name, name.upper(), name.title()):
        out = redact_url(f"https://h:1/v1?{variant}=S3CRET&n=1")
        assert out == f"https://h:1/v1?{variant}=***&n=1"


def test_redact_config_walks_nested_structures() -> None:
    cfg = {
        "model": {"base_url": "http://u:pw@h:8000/v1", "model": "m", "timeout_s": 60.0},
        "mirrors": ["https://h/x?token=t1", ("http://a:b@c/", 3)],
        "note": "a password@ that is not a URL",
        "n": None,
    }
    out = redact_config(cfg)
    assert out == {
        "model": {"base_url": "http://***@h:8000/v1", "model": "m", "timeout_s": 60.0},
        "mirrors": ["https://h/x?token=***", ("http://***@c/", 3)],
        "note": "a password@ that is not a URL",
        "n": None,
    }
    assert cfg["model"]["base_url"] == "http://u:pw@h:8000/v1"  # the input is not modified
    for secret in ("pw", "t1", ":b@"):
        assert secret not in repr(out)


def test_redact_text_finds_urls_in_messages() -> None:
    msg = "POST http://u:pw@h:1/v1/chat failed; see ('https://x/?sig=abc') and http://ok/v1"
    assert (
        redact_text(msg) == "POST http://***@h:1/v1/chat failed; see ('https://x/?sig=***') and http://ok/v1"
    )
