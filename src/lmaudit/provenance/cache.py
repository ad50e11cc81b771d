"""Content-addressed response cache.

Every backend answer is stored under ``sha256(backend identity digest + request payload)``,
one small JSON file per entry in a two-level fan-out (``ab/abcdef....json``). Entries are
written to a temporary file and renamed, so concurrent processes and killed runs never
leave a half-written entry: a reader sees either nothing or the whole answer.

Processes sharing a cache do not duplicate work: before asking a backend, a process
*claims* each missing key (``<key>.claim``, created with O_EXCL, so exactly one process
wins); others wait for the entry. A claim whose owner died (same host, pid gone) or that is
older than ``claim_ttl_s`` is taken over.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmaudit.backends.base import canonical_json, sha256_text
from lmaudit.provenance.io import atomic_write_text


def cache_key(backend_digest: str, payload: dict[str, Any]) -> str:
    return sha256_text(canonical_json({"backend": backend_digest, "request": payload}))


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes}


@dataclass
class ResponseCache:
    root: Path
    stats: CacheStats = field(default_factory=CacheStats)

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        p = self._path(key)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.stats.misses += 1
            return None
        try:
            entry = json.loads(text)
        except json.JSONDecodeError:  # cannot happen with atomic writes; treat as absent
            self.stats.misses += 1
            return None
        if entry.get("key") != key:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return entry["value"]

    def put(self, key: str, value: Any, payload: dict[str, Any] | None = None) -> None:
        entry = {"key": key, "value": value}
        if payload is not None:
            entry["request"] = payload
        atomic_write_text(self._path(key), canonical_json(entry), fsync=False)
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
