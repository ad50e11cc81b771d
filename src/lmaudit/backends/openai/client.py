"""HTTP for the ``openai`` backend and the OpenAI-compatible embedder: retries with capped
waits, a deadline per request, a reachability check, and messages with no credentials in them;
and the server fields both configs need (:func:`server_and_model`, :meth:`HttpClient.from_config`).

* 429, 5xx, timeouts and connections dropped mid-answer are retried with exponential
  backoff and full jitter. A ``Retry-After`` header is honoured but never beyond
  ``backoff_cap_s``: a server asking for a day's pause gets at most the cap, and the
  request's deadline decides when to give up.
* Every request has a total deadline, ``request_deadline_s`` (attempts, waits, the
  per-attempt ``timeout_s`` and the reading of each answer's body together). A request that
  cannot finish in time fails with the last error seen rather than waiting longer. The body is
  read as it arrives (urllib3's ``read1``) with the deadline checked between reads, so a server
  that sends its answer a byte at a time, each read inside ``timeout_s``, cannot hold a run.
* An answer is read up to ``max_answer_bytes`` (decoded; :data:`MAX_ANSWER_BYTES` unless the
  backend sets another bound): one that declares more (``Content-Length``) or sends more is
  refused in one line naming the URL and the bound, without being read further, retried or
  cached. Its JSON is decoded by :func:`lmaudit.provenance.jsoncheck.bounded_loads`: nesting
  past its bound or a lone UTF-16 surrogate is refused the same way.
* A connection that cannot be made at all (refused, host unknown) is not retried: it fails
  at once with ``cannot reach <url>``. Before its first request the client checks the
  server once (``GET <base_url>/models``), so a wrong address stops a run before any
  measurement or gate is asked, and a run served entirely from the cache never needs it (the
  listing is also what :mod:`lmaudit.backends.openai.served` checks against the cache).
* URLs in messages pass through :func:`lmaudit.provenance.redact.redact_text`, and the
  API key (read from the environment at request time) is replaced by ``***``.
* Credentials written into ``base_url`` (``http://user:password@host/v1``) are sent as HTTP
  Basic auth (requests does so); an API key is sent as a Bearer token. A request carries one
  ``Authorization`` header, so a client given both refuses before its first request instead of
  dropping one. The Basic header's value (the base64 of ``user:password``) and the password are
  replaced by ``***`` in every message, as the key is, so a server echoing the header leaks
  neither.
"""

from __future__ import annotations

import base64
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests
from requests.auth import HTTPBasicAuth
from requests.utils import get_auth_from_url
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import NewConnectionError

from lmaudit.backends.openai.config import OPENAI_DEFAULTS
from lmaudit.backends.openai.wire import parse_retry_after, server_message
from lmaudit.errors import BackendError, ServerUnreachable, StrictJsonError
from lmaudit.provenance.jsoncheck import bounded_loads
from lmaudit.provenance.redact import MASK, redact_text, redact_url

log = logging.getLogger(__name__)

#: The most bytes of one answer read by default: a chat or completions answer (a few draws, the
#: top log-probabilities of a few positions) is kilobytes.
MAX_ANSWER_BYTES = 8 << 20


class _BodyPastDeadline(Exception):
    """The answer's body was still arriving when the request's deadline passed."""


class _BodyTooLarge(Exception):
    """The answer declares, or has sent, more than ``max_answer_bytes``."""


def _unreachable(e: requests.RequestException) -> bool:
    if not isinstance(e, requests.ConnectionError) or isinstance(e, requests.Timeout):
        return False
    reason = getattr(e.args[0], "reason", e.args[0]) if e.args else None
    return isinstance(reason, NewConnectionError)


def connection_reason(e: BaseException) -> str:
    """The system's reason a connection failed (``[Errno 111] Connection refused``), from the
    message urllib3 wraps it in; else the error's type."""
    found = re.findall(r"\[Errno -?\d+\] [^'\")\]]+", str(e))
    return found[-1].strip() if found else type(e).__name__


def server_and_model(cfg: Mapping[str, Any], whose: str) -> tuple[str, str]:
    """A config's ``base_url`` (without a trailing slash) and served ``model`` name, both
    required: a missing one is a BackendError naming ``whose`` config and the field."""
    for key in ("base_url", "model"):
        if not cfg.get(key):
            raise BackendError(f"{whose} config: field '{key}' is required")
    return str(cfg["base_url"]).rstrip("/"), str(cfg["model"])


def url_secrets(url: str) -> list[str]:
    """What credentials in ``url`` become on the wire and in a server's echo: the value of the
    Basic header requests sends, and the password (decoded, and as typed) when 4+ characters."""
    user, password = get_auth_from_url(url)
    if not (user or password):
        return []
    sent = requests.Request("GET", "http://host/").prepare()
    try:
        HTTPBasicAuth(user, password)(sent)  # the header requests sends for them
        token = str(sent.headers["Authorization"]).split(" ", 1)[1]
    except UnicodeError:  # requests cannot send them (not latin-1); mask their UTF-8 form
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
    typed = url.split("://", 1)[-1].split("/", 1)[0].rpartition("@")[0].partition(":")[2]
    return [token, *(p for p in {password, typed} if len(p) >= 4)]


class HttpClient:
    """JSON over HTTP with the retry, deadline and reachability rules above."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str,
        timeout_s: float,
        max_retries: int,
        backoff_base_s: float,
        backoff_cap_s: float,
        deadline_s: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        unreachable_hint: str = "",
    ) -> None:
        if deadline_s <= 0 or backoff_cap_s < 0:
            raise BackendError("openai backend config: need request_deadline_s > 0 and backoff_cap_s >= 0")
        if max_answer_bytes < 1:
            raise BackendError("openai backend config: need max_answer_bytes >= 1")
        self.max_answer_bytes = max_answer_bytes
        self.base_url = base_url
        self.unreachable_hint = unreachable_hint  # "; start ..." after "cannot reach <url> (...)"
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.deadline_s = deadline_s
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()  # backoff jitter only: never touches outputs
        self._local = threading.local()
        self._checked = False
        self._check_lock = threading.Lock()
        self._url_secrets = url_secrets(base_url)

    @classmethod
    def from_config(
        cls,
        base_url: str,
        cfg: Mapping[str, Any],
        *,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        unreachable_hint: str = "",
    ) -> HttpClient:
        """A client with a config's HTTP fields (``api_key_env``, ``timeout_s``, ``max_retries``,
        ``backoff_base_s``, ``backoff_cap_s``, ``request_deadline_s``, ``max_answer_bytes``); a
        field left out takes the ``openai`` model config's default (``max_answer_bytes``: the
        one given here)."""

        def field(name: str) -> Any:
            value = cfg.get(name)
            return OPENAI_DEFAULTS[name] if value is None else value

        answer = cfg.get("max_answer_bytes")
        return cls(
            base_url,
            api_key_env=str(cfg.get("api_key_env") or OPENAI_DEFAULTS["api_key_env"]),
            timeout_s=float(field("timeout_s")),
            max_retries=int(field("max_retries")),
            backoff_base_s=float(field("backoff_base_s")),
            backoff_cap_s=float(field("backoff_cap_s")),
            deadline_s=float(field("request_deadline_s")),
            sleep=sleep,
            clock=clock,
            rng=rng,
            max_answer_bytes=int(max_answer_bytes if answer is None else answer),
            unreachable_hint=unreachable_hint,
        )

    def _session(self) -> requests.Session:
        s = getattr(self._local, "session", None)
        if s is None:
            s = self._local.session = requests.Session()
        return s

    def _key(self) -> str:
        return os.environ.get(self.api_key_env, "")

    def redact(self, text: str) -> str:
        for secret in sorted([self._key(), *self._url_secrets], key=len, reverse=True):
            if secret:
                text = text.replace(secret, MASK)
        return redact_text(text)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = self._key()
        if key and self._url_secrets:
            raise BackendError(
                f"{redact_url(self.base_url)}: credentials in the URL (sent as HTTP Basic auth) and an API "
                f"key in ${self.api_key_env} (sent as a Bearer token) are both set, and a request carries "
                f"one Authorization header; unset ${self.api_key_env} or remove the credentials from the URL"
            )
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    # --- the reachability check ------------------------------------------------------------

    def _unreachable(self, where: str, e: BaseException) -> str:
        """``cannot reach <where> (<the system's reason>)``, then how to start the server."""
        return f"cannot reach {where} ({connection_reason(e)}){self.unreachable_hint}"

    def _get(self, url: str) -> tuple[requests.Response, bytes]:
        """``GET url`` once, its body read within the deadline (:meth:`_read_body`)."""
        start = self._clock()
        resp = self._session().get(
            url, headers=self._headers(), timeout=min(self.timeout_s, self.deadline_s), stream=True
        )
        with resp:
            return resp, self._read_body(resp, start)

    def check_server(self) -> Any:
        """``GET <base_url>/models`` once: ServerUnreachable when nothing answers there, a
        BackendError when the server refuses the credentials; any other answer is a server.
        Returns the decoded listing (None when the answer is no JSON or no success)."""
        url = f"{self.base_url}/models"
        try:
            resp, data = self._get(url)
        except _BodyPastDeadline as e:
            raise BackendError(
                self.redact(
                    f"GET {redact_url(url)} gave up at its deadline (request_deadline_s={self.deadline_s:g}): {e}"
                )
            ) from None
        except _BodyTooLarge as e:
            raise BackendError(self.redact(self._too_large("GET", redact_url(url), e))) from None
        except (requests.RequestException, Urllib3Error) as e:
            if isinstance(e, requests.RequestException) and (
                _unreachable(e) or isinstance(e, requests.ConnectTimeout)
            ):
                raise ServerUnreachable(
                    self.redact(self._unreachable(redact_url(self.base_url), e))
                ) from None
            log.warning("%s", self.redact(f"GET {redact_url(url)}: {type(e).__name__}: {e}; carrying on"))
            self._checked = True
            return None
        if resp.status_code in (401, 403):
            raise BackendError(
                self.redact(
                    f"{redact_url(self.base_url)} refused the credentials (HTTP {resp.status_code}: "
                    f"{server_message(data.decode('utf-8', 'replace'), resp.reason)}); "
                    f"the key is read from ${self.api_key_env}"
                )
            )
        self._checked = True
        if resp.status_code >= 300:
            log.info("GET %s returned HTTP %s; carrying on", redact_url(url), resp.status_code)
            return None
        try:
            return bounded_loads(data.decode("utf-8"))
        except ValueError:
            return None

    def get_json(self, url: str) -> Any:
        """``GET url`` once, without retries: the decoded JSON answer, or None when the server
        gives none there (no such route, an error, no JSON). For what a server reports about
        itself, which a run can do without."""
        self._ensure_checked()
        try:
            resp, data = self._get(url)
        except (requests.RequestException, Urllib3Error, _BodyPastDeadline) as e:
            log.info("%s", self.redact(f"GET {redact_url(url)}: {type(e).__name__}: {e}"))
            return None
        if resp.status_code >= 300:
            return None
        try:
            return bounded_loads(data.decode("utf-8"))
        except (ValueError, StrictJsonError):
            return None

    def _ensure_checked(self) -> None:
        if self._checked:
            return
        with self._check_lock:
            if not self._checked:
                self.check_server()
                self._checked = True

    # --- POST with retries ----------------------------------------------------------------------

    def post(self, url: str, body: dict[str, Any]) -> Any:
        """POST JSON with retries; returns the decoded JSON body or raises BackendError."""
        self._ensure_checked()
        where = redact_url(url)
        start = self._clock()
        err = "no attempt made"
        for attempt in range(self.max_retries + 1):
            left = self.deadline_s - (self._clock() - start)
            if left <= 0:
                break
            retry_after: float | None = None
            try:
                resp = self._session().post(
                    url, json=body, headers=self._headers(), timeout=min(self.timeout_s, left), stream=True
                )
                with resp:
                    data = self._read_body(resp, start)
            except _BodyPastDeadline as e:
                err = str(e)
                break
            except _BodyTooLarge as e:  # not retried: the server would send it again
                raise BackendError(self.redact(self._too_large("POST", where, e))) from None
            except (requests.RequestException, Urllib3Error) as e:
                if isinstance(e, requests.RequestException) and _unreachable(e):
                    raise ServerUnreachable(self.redact(self._unreachable(where, e))) from None
                if not isinstance(
                    e,
                    requests.ConnectionError
                    | requests.Timeout
                    | requests.exceptions.ChunkedEncodingError
                    | Urllib3Error,
                ):
                    raise BackendError(self.redact(f"POST {where} failed: {type(e).__name__}: {e}")) from None
                err = f"{type(e).__name__}: {e}"
            else:
                if resp.status_code < 300:
                    try:
                        return bounded_loads(data.decode("utf-8"))
                    except StrictJsonError as e:
                        raise BackendError(
                            self.redact(f"POST {where}: HTTP {resp.status_code} but the body is refused: {e}")
                        ) from None
                    except ValueError as e:
                        what = (
                            f"not UTF-8 (byte {e.start}: {data[max(0, e.start - 20) : e.start + 20]!r})"
                            if isinstance(e, UnicodeDecodeError)
                            else f"not JSON: {data[:300].decode('utf-8', 'replace')!r}"
                        )
                        raise BackendError(
                            self.redact(f"POST {where}: HTTP {resp.status_code} but the body is {what}")
                        ) from None
                msg = server_message(data.decode("utf-8", "replace"), resp.reason)
                if resp.status_code != 429 and resp.status_code < 500:
                    raise BackendError(self.redact(f"POST {where} returned HTTP {resp.status_code}: {msg}"))
                err = f"HTTP {resp.status_code}: {msg}"
                retry_after = parse_retry_after(resp.headers.get("Retry-After"))
            if attempt == self.max_retries:
                raise BackendError(
                    self.redact(f"POST {where} failed after {self.max_retries + 1} attempts: {err}")
                )
            delay = self.wait_s(attempt, retry_after)
            left = self.deadline_s - (self._clock() - start)
            if delay >= left:
                break
            log.warning(
                "%s",
                self.redact(f"POST {where}: {err}; retry {attempt + 1}/{self.max_retries} in {delay:.2f} s"),
            )
            self._sleep(delay)
        raise BackendError(
            self.redact(
                f"POST {where} gave up at its deadline (request_deadline_s={self.deadline_s:g}): {err}"
            )
        )

    def _too_large(self, method: str, where: str, e: _BodyTooLarge) -> str:
        return (
            f"{method} {where}: the answer is larger than {self.max_answer_bytes:,} bytes ({e}), the most "
            "lmaudit reads from one answer (max_answer_bytes); refused, not cached"
        )

    def _read_body(self, resp: requests.Response, start: float) -> bytes:
        """The answer's body, read as it arrives, within the request's deadline and up to
        ``max_answer_bytes`` (decoded): _BodyTooLarge past it, or when the answer declares more."""
        bound = self.max_answer_bytes
        declared = resp.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > bound and not resp.headers.get("Content-Encoding"):
            raise _BodyTooLarge(f"it declares {int(declared):,}")
        parts: list[bytes] = []
        got = 0
        while True:
            if self._clock() - start > self.deadline_s:
                raise _BodyPastDeadline(
                    f"HTTP {resp.status_code}, the body still arriving ({got} bytes read)"
                )
            chunk = resp.raw.read1(min(1 << 16, bound + 1 - got), decode_content=True)
            if not chunk:
                return b"".join(parts)
            got += len(chunk)
            if got > bound:  # one byte past it: no more is read
                raise _BodyTooLarge("more was sent")
            parts.append(chunk)

    def wait_s(self, attempt: int, retry_after: float | None) -> float:
        """The pause before retry ``attempt + 1``: ``Retry-After`` when sent, else full jitter;
        never more than ``backoff_cap_s``."""
        if retry_after is not None:
            return min(retry_after, self.backoff_cap_s)
        return self._rng.uniform(0.0, min(self.backoff_cap_s, self.backoff_base_s * 2**attempt))
