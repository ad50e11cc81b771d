"""Content-addressed response cache.

Every backend answer is stored under ``sha256(backend identity digest + request payload)``,
one small JSON file per entry in a two-level fan-out (``ab/abcdef....json``). Entries are
written to a temporary file and renamed, so concurrent processes and killed runs never
leave a half-written entry: a reader sees either nothing or the whole answer. Two writers
racing on the same key write identical content; the second rename simply wins.
"""

from __future__ import annotations

import json
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
