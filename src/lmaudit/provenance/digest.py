"""Digests of files, configs and plans (SHA-256 everywhere)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from lmaudit.provenance.io import open_input


def canonical_json(obj: Any) -> str:
    """Deterministic JSON used for every digest (sorted keys, no whitespace, UTF-8)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    """SHA-256 of a text's UTF-8 bytes, in hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a regular file, read in blocks (a pipe or device is refused: :func:`open_input`)."""
    h = hashlib.sha256()
    with open_input(path) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def json_digest(obj: Any) -> str:
    """Digest of a JSON-able object in canonical form (key order and whitespace do not matter)."""
    return sha256_text(canonical_json(obj))


__all__ = ["canonical_json", "file_sha256", "json_digest", "sha256_text"]
