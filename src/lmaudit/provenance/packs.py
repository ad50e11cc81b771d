"""The pack files of a response cache folder (see :mod:`lmaudit.provenance.cache`, "Packs").

A pack is ``packs/<sha256 of its content>.jsonl``, one verified cache entry per line, written
atomically. :class:`Packs` writes them and knows where each key's lines are: an index (key ->
pack, byte offset, length) built from the pack files and refreshed when the ``packs`` folder
changes, so packs other processes write are seen; a pack removed under it (by
:mod:`lmaudit.provenance.compact`, which rewrites packs) is dropped from the index. Reading and checking an entry is the cache's business; this module only
finds its bytes.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

from lmaudit.provenance.digest import sha256_text
from lmaudit.provenance.io import atomic_write_bytes
from lmaudit.provenance.jsoncheck import bounded_loads

PACKS = "packs"
# a folder's mtime comes from a coarse clock: a listing is trusted to stay current only once
# the folder's last change is this much older than the listing (else it is listed again)
RACY_NS = 1_000_000_000
#: Pack files kept open for reading (reads tend to stay in one pack).
OPEN_PACKS = 16

Location = tuple[str, int, int]  # (pack file name, byte offset, length) of one entry's line


class Packs:
    """The packs of one cache folder: :meth:`write` one, :meth:`locations` of a key, :meth:`read`."""

    def __init__(self, root: Path) -> None:
        self.folder = Path(root) / PACKS
        self._where: dict[str, list[Location]] = {}  # newest write of ours first
        self._known: set[str] = set()
        self._fds: dict[str, int] = {}  # most recently used last
        self._listed: tuple[int, int] | None = None  # (folder mtime, when listed), ns

    def write(self, lines: Sequence[tuple[str, bytes]]) -> str:
        """Write the ``(key, entry line)`` pairs as one pack; its file name."""
        name, body = pack_body([line for _, line in lines])
        atomic_write_bytes(self.folder / name, body, fsync=False)
        self._known.add(name)
        offset = 0
        for key, line in lines:
            self._where.setdefault(key, []).insert(0, (name, offset, len(line)))
            offset += len(line) + 1
        return name

    def locations(self, key: str) -> list[Location]:
        """Where the key's lines are, the newest of ours first (after a refresh of the index)."""
        self._refresh()
        return list(self._where.get(key, ()))

    def read(self, where: Location) -> bytes:
        """The bytes of one line (OSError when the pack cannot be read; FileNotFoundError when
        the pack is gone, after which its lines are no longer offered)."""
        try:
            return os.pread(self._fd(where[0]), where[2], where[1])
        except FileNotFoundError:
            self._vanished(where[0])
            raise

    def index(self) -> dict[str, list[Location]]:
        """Every key in the packs with its locations (after a refresh)."""
        self._refresh()
        return {k: list(v) for k, v in self._where.items() if v}

    def names(self) -> list[str]:
        """The pack files in the folder, sorted."""
        try:
            return sorted(
                n for n in os.listdir(self.folder) if n.endswith(".jsonl") and not n.startswith(".")
            )
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _vanished(self, name: str) -> None:
        """A pack was removed (rewritten by a compaction): forget its lines."""
        self._known.discard(name)
        for key in list(self._where):
            self._where[key] = [w for w in self._where[key] if w[0] != name]

    def forget(self, key: str, where: Location) -> None:
        """Do not offer this line for this key again (it was damaged)."""
        with contextlib.suppress(KeyError, ValueError):
            self._where[key].remove(where)

    def describe(self, key: str, where: Location) -> str:
        return f"{self.folder / where[0]} (line of key {key})"

    def close(self) -> None:
        """Close the packs held open for reading (reopened when needed)."""
        while self._fds:
            os.close(self._fds.popitem()[1])

    def _fd(self, name: str) -> int:
        fd = self._fds.pop(name, None)
        if fd is None:
            fd = os.open(self.folder / name, os.O_RDONLY)
            if len(self._fds) >= OPEN_PACKS:
                os.close(self._fds.pop(next(iter(self._fds))))
        self._fds[name] = fd
        return fd

    def _refresh(self) -> None:
        """Index the pack files not indexed yet, if the folder may have changed."""
        try:
            mtime = self.folder.stat().st_mtime_ns
        except (FileNotFoundError, NotADirectoryError):
            return
        listed = self._listed
        if listed is not None and listed[0] == mtime and mtime < listed[1] - RACY_NS:
            return
        self._listed = (mtime, time.time_ns())
        for name in self.names():
            if name not in self._known:
                self._index(self.folder / name)

    def _index(self, path: Path) -> None:
        try:
            body = path.read_bytes()
        except OSError:
            return  # not readable: not indexed (and tried again at the next listing)
        self._known.add(path.name)
        offset = 0
        for line in body.split(b"\n"):
            key: str | None = None
            # canonical JSON sorts the fields: a well-formed line starts with its key
            if line.startswith(b'{"key":"') and line[72:73] == b'"':
                key = line[8:72].decode("ascii", "replace")
            elif line.strip():
                with contextlib.suppress(ValueError, AttributeError):
                    key = str(bounded_loads(line.decode("utf-8")).get("key"))
            if key is not None:
                self._where.setdefault(key, []).append((path.name, offset, len(line)))
            offset += len(line) + 1


def pack_body(lines: Sequence[bytes]) -> tuple[str, bytes]:
    """A pack's file name (the digest of its content) and content: the lines, each ended by a newline."""
    body = b"\n".join(lines) + b"\n"
    return f"{sha256_text(body.decode('utf-8'))}.jsonl", body


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries (a rename or removal in it) to disk."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
