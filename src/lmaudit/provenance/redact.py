"""Credentials out of everything lmaudit records: URLs with userinfo or secret query parameters.

``redact_url`` rewrites one URL: its userinfo (``user:password@``) becomes ``***@`` and the
value of every query parameter whose name looks like a credential (``key``, ``api_key``,
``apikey``, ``token``, ``access_token``, ``auth``, ``password``, ``secret``, ``sig``,
``signature``; any case) becomes ``***``. Scheme, host, port, path, the other parameters and
the fragment are kept as written. Userinfo runs to the last ``@`` before the path, so a raw
``#``, ``?`` or ``:`` typed inside a password is masked too. A string that is not a URL (no
``scheme://host``) comes back unchanged, so the function is safe on any string.

``redact_config`` walks dicts, lists and tuples (as Hydra configs resolve to) and redacts
every string value that is such a URL; keys and non-string leaves are kept. ``redact_text``
does the same to URLs embedded in free text (error messages, log lines), and masks the value of
an HTTP ``Authorization`` header quoted in it (a server echoing a request): ``Bearer <token>``
and ``Basic <base64 of user:password>`` become ``Bearer ***`` and ``Basic ***``.

Apply them to whatever leaves the process: plan files, audit records, reports, MLflow
params and artifacts, and exception messages that print URLs.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

__all__ = ["SECRET_PARAMS", "redact_config", "redact_text", "redact_url"]

MASK = "***"
SECRET_PARAMS = frozenset(
    {"key", "api_key", "apikey", "token", "access_token", "auth", "password", "secret", "sig", "signature"}
)
# scheme://authority..., up to whitespace or a closing quote/bracket, for URLs inside text
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>()\[\]{}]+")
# an Authorization header's value quoted in text: its scheme, then the credentials
_AUTH_IN_TEXT = re.compile(r"\b(Basic|Bearer)(\s+)([A-Za-z0-9+/=._~\-]{8,})", re.IGNORECASE)


def _redact_query(query: str) -> str:
    if not query:
        return query
    parts = []
    for piece in query.split("&"):
        name, eq, _value = piece.partition("=")
        if eq and unquote_plus(name).strip().lower() in SECRET_PARAMS:
            parts.append(f"{name}={MASK}")
        else:
            parts.append(piece)
    return "&".join(parts)


def redact_url(url: str) -> str:
    """``url`` with its userinfo and credential-looking query values replaced by ``***``."""
    if "://" not in url:
        return url
    head = url.split("://", 1)[1].split("/", 1)[0]
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket: redact by hand
        return _by_hand(url)
    if not parts.scheme or not parts.netloc:
        return url
    if "@" in head and "@" not in parts.netloc:  # a raw '#' or '?' inside the password
        return _by_hand(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = _redact_query(parts.query)
    if netloc == parts.netloc and query == parts.query:
        return url  # keep the string exactly as written (urlunsplit normalises a little)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _by_hand(url: str) -> str:
    scheme, _, rest = url.partition("://")
    head = rest.split("/", 1)[0]
    at = head.rfind("@")  # userinfo runs to the last '@' before the path, whatever it holds
    cut = re.search(r"[/?#]", rest[at + 1 :])
    end = len(rest) if cut is None else at + 1 + cut.start()
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        authority = f"{MASK}@{authority.rsplit('@', 1)[1]}"
    path, q, query = tail.partition("?")
    if q:
        query, h, frag = query.partition("#")
        tail = f"{path}?{_redact_query(query)}{h}{frag}"
    return f"{scheme}://{authority}{tail}"


def _is_basic_credentials(token: str) -> bool:
    """Whether ``token`` is the base64 of ``user:password`` (what a Basic header carries)."""
    try:
        return b":" in base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        return False


def _mask_auth(m: re.Match[str]) -> str:
    scheme, space, token = m.group(1), m.group(2), m.group(3)
    if scheme.lower() == "basic" and not _is_basic_credentials(token):
        return m.group()
    return f"{scheme}{space}{MASK}"


def redact_text(text: str) -> str:
    """Every URL inside ``text`` redacted, and every quoted Authorization header value masked
    (for error messages and log lines)."""
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group()), text)
    return _AUTH_IN_TEXT.sub(_mask_auth, text)


def redact_config(obj: Any) -> Any:
    """A copy of ``obj`` (dicts, lists, tuples) with every URL string redacted."""
    if isinstance(obj, str):
        return redact_url(obj)
    if isinstance(obj, dict):
        return {k: redact_config(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_config(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_config(v) for v in obj)
    return obj
