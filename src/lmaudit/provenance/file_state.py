"""Content digests of large files, computed once per version of each file (as DVC's state).

A file's SHA-256 is remembered with the ``(inode, size, mtime_ns)`` it was computed for, in a
small JSON file (:func:`state_path`: ``$LMAUDIT_DIGEST_STATE``, else
``~/.cache/lmaudit/file-digests.json``); while those are unchanged the digest is reused, so
identifying a checkpoint of gigabytes costs one ``stat`` per file after the first time. A file
written in the last :data:`RACY_SECONDS` is hashed but not remembered: a second write within the
file system's timestamp granularity could leave its ``mtime_ns`` unchanged (git's "racily
clean" case). The state is written under a lock, to a temporary file then renamed; a damaged
or unreadable state is treated as empty (digests are computed again, never trusted blindly).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import atomic_write_json

#: A file modified this recently is hashed on every use, never remembered.
RACY_SECONDS = 2.0


def state_path() -> Path:
    """Where remembered digests are kept: ``$LMAUDIT_DIGEST_STATE`` or
    ``~/.cache/lmaudit/file-digests.json``."""
    env = os.environ.get("LMAUDIT_DIGEST_STATE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "lmaudit" / "file-digests.json"


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _read(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_name(path.name + ".lock").open("a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def file_digests(paths: Sequence[Path], state: Path | None = None) -> dict[Path, str]:
    """The SHA-256 of each regular file in ``paths`` (absolute or not), reusing the digest
    remembered for a file whose inode, size and mtime are unchanged."""
    state = state_path() if state is None else state
    remembered = _read(state)
    out: dict[Path, str] = {}
    fresh: dict[str, dict[str, Any]] = {}
    for p in paths:
        key = str(Path(p).resolve())
        st = os.stat(key)
        entry = remembered.get(key)
        if (
            isinstance(entry, dict)
            and entry.get("stamp") == _stamp(st)
            and isinstance(entry.get("sha256"), str)
        ):
            out[p] = entry["sha256"]
            continue
        digest = file_sha256(key)
        after = os.stat(key)
        out[p] = digest
        if _stamp(after) == _stamp(st) and time.time() - after.st_mtime > RACY_SECONDS:
            fresh[key] = {"stamp": _stamp(after), "sha256": digest}
    if fresh:
        with contextlib.suppress(OSError), _locked(state):  # a read-only home only costs re-hashing
            current = _read(state)
            current.update(fresh)
            # forget files that are gone, so the state does not grow with deleted checkpoints
            kept = {k: v for k, v in current.items() if os.path.exists(k)}
            atomic_write_json(state, kept)
    return out
