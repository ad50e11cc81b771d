"""Content-addressed response cache.

Every backend answer is stored under ``sha256(backend identity digest + request payload)``,
one small JSON file per entry in a two-level fan-out (``ab/abcdef....json``). Entries are
written to a temporary file and renamed, so concurrent processes and killed runs never
leave a half-written entry: a reader sees either nothing or the whole answer.

**Verified entries.** An entry is ``{"key", "value", "request"?, "sha256"}``, where
``sha256`` is the digest of the canonical JSON of the entry without that field. On reading,
an entry that is unreadable (a directory, not UTF-8), not JSON, not an object, stored under
another key, without a value, whose digest does not match its content, or whose value fails
the caller's shape check is *rejected*: one warning line names the entry's path, the
``invalid`` counter of :class:`CacheStats` counts it, and the entry is treated as missing, so
the request is asked again and the entry rewritten atomically (a directory in the way is
moved aside to ``<entry>.invalid-<ns>``).

**Legacy entries.** Entries written before digests existed (``{"key", "value"}`` with no
``sha256``, e.g. the DVC-tracked caches under ``cache/<study>/<run>``) are accepted when
they parse, carry their own key and their value passes the caller's shape check; they are
served as they are, never rewritten (so DVC's digests of those folders stay put), and
counted as ``legacy`` in the stats, which the audit record shows. Such an entry has nothing
to be verified against: an edit that keeps its shape cannot be detected, and the digest
guards against corruption and accidental edits, not against someone who removes it.
Cache keys are unchanged by the digest: it is stored inside the entry, not in its name.

Processes sharing a cache do not duplicate work: before asking a backend, a process
*claims* each missing key (``<key>.claim``, created with O_EXCL, so exactly one process
wins); others wait for the entry. A claim whose owner died (same host, pid gone) or that is
older than ``claim_ttl_s`` is taken over.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmaudit.backends.base import canonical_json, sha256_text
from lmaudit.provenance.io import atomic_write_text
from lmaudit.provenance.jsoncheck import json_type

log = logging.getLogger(__name__)


def cache_key(backend_digest: str, payload: dict[str, Any]) -> str:
    return sha256_text(canonical_json({"backend": backend_digest, "request": payload}))


def entry_digest(entry: dict[str, Any]) -> str:
    """The digest an entry carries: of its canonical JSON without the ``sha256`` field."""
    return sha256_text(canonical_json({k: v for k, v in entry.items() if k != "sha256"}))


class InvalidEntry(ValueError):
    """A cache entry that cannot be served; the message says why."""


def _no_constant(name: str) -> Any:
    raise InvalidEntry(f"holds {name}, which is not JSON")


def parse_entry(raw: bytes, key: str) -> tuple[Any, bool]:
    """``(value, verified)`` of a stored entry, or InvalidEntry; ``verified`` is False for a
    legacy entry (no digest)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidEntry(f"not UTF-8 (byte {e.start})") from None
    try:
        entry = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise InvalidEntry(f"not valid JSON ({e.msg}, line {e.lineno} column {e.colno})") from None
    if not isinstance(entry, dict):
        raise InvalidEntry(f"a JSON {json_type(entry)}, not an object")
    if entry.get("key") != key:
        raise InvalidEntry(f"stored under key {str(entry.get('key'))[:80]!r}, not its own")
    if "value" not in entry:
        raise InvalidEntry("has no 'value'")
    digest = entry.get("sha256")
    if digest is None:
        return entry["value"], False
    if digest != entry_digest(entry):
        raise InvalidEntry("content does not match its sha256 (edited or damaged)")
    return entry["value"], True


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    invalid: int = 0  # entries rejected (reported, asked again)
    legacy: int = 0  # hits on entries without a digest (accepted unverified)

    def as_dict(self) -> dict[str, int]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "writes": self.writes,
            "invalid": self.invalid,
            "legacy": self.legacy,
        }


@dataclass
class ResponseCache:
    root: Path
    stats: CacheStats = field(default_factory=CacheStats)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self._rejected: set[str] = set()
        self._legacy: set[str] = set()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, check: Callable[[Any], Any] | None = None) -> Any | None:
        """The stored value (passed through ``check``, which raises ValueError, TypeError or
        KeyError on a value of the wrong shape), or None when absent or rejected."""
        p = self._path(key)
        try:
            raw = p.read_bytes()
        except FileNotFoundError:
            self.stats.misses += 1
            return None
        except OSError as e:  # a directory, no permission ...
            self._reject(key, p, f"unreadable ({e.strerror or type(e).__name__})")
            return None
        try:
            value, verified = parse_entry(raw, key)
            if check is not None:
                value = check(value)
        except InvalidEntry as e:
            self._reject(key, p, str(e))
            return None
        except (KeyError, TypeError, ValueError) as e:
            self._reject(key, p, f"value of the wrong shape ({type(e).__name__}: {e})")
            return None
        if not verified and key not in self._legacy:
            self._legacy.add(key)
            self.stats.legacy += 1
        self.stats.hits += 1
        return value

    def _reject(self, key: str, path: Path, why: str) -> None:
        self.stats.misses += 1
        if key not in self._rejected:
            self._rejected.add(key)
            self.stats.invalid += 1
            log.warning("cache entry %s: %s; treated as missing and asked again", path, why)

    def put(self, key: str, value: Any, payload: dict[str, Any] | None = None) -> None:
        entry: dict[str, Any] = {"key": key, "value": value}
        if payload is not None:
            entry["request"] = payload
        entry["sha256"] = entry_digest(entry)
        p = self._path(key)
        if p.is_dir():  # a rejected entry: keep it for inspection, out of the way
            with contextlib.suppress(FileNotFoundError):
                p.rename(p.with_name(f"{p.name}.invalid-{time.time_ns()}"))
        atomic_write_text(p, canonical_json(entry), fsync=False)
        self._rejected.discard(key)
        self.stats.writes += 1

    def __contains__(self, key: str) -> bool:
        return self._path(key).exists()

    # -- claims ---------------------------------------------------------------------------
    claim_ttl_s: float = 3600.0

    def _claim_path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.claim"

    def claim(self, key: str) -> bool:
        """Try to become the one process that computes ``key``; False if another holds it."""
        p = self._claim_path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._stale(p):
                    with contextlib.suppress(FileNotFoundError):
                        p.unlink()
                    continue
                return False
            with os.fdopen(fd, "w") as fh:
                fh.write(f"{os.getpid()} {socket.gethostname()} {time.time()}")
            return True
        return False

    def release(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._claim_path(key).unlink()

    def claimed(self, key: str) -> bool:
        p = self._claim_path(key)
        return p.exists() and not self._stale(p)

    def _stale(self, p: Path) -> bool:
        try:
            pid_s, host, t = p.read_text().split()
        except (FileNotFoundError, ValueError):
            return False  # being written right now, or gone
        if time.time() - float(t) > self.claim_ttl_s:
            return True
        if host == socket.gethostname():
            try:
                os.kill(int(pid_s), 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
        return False
