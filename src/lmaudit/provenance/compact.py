"""Compaction of a response cache folder (:func:`compact`).

Every entry a reader would be served, from a pack or from its own file, goes into packs: entries
sorted by key, a new pack whenever the next line would take the pack past
:data:`MAX_PACK_BYTES`, each pack named by the digest of its content. The result depends only
on the entries, not on the order they were written in or on the host, so the same cache content
gives the same files anywhere; a compacted folder compacts to itself (nothing is written). With
``keep``, entries whose key is not in it are dropped, from their own files and out of the packs
(which are rewritten).

**Crashes.** The new packs are written atomically and flushed to disk (file and folder) before
anything is removed, and a key found in a pack and in its own file is served from the pack with
the same value, so a compaction killed at any point leaves every entry readable; running it
again finishes the job. It refuses (:class:`CacheBusy`) while any process holds a claim on the
folder, and holds the ``claims`` folder's lock while it runs, so no group claim starts
meanwhile: it is meant for a folder no run is filling (the measure stage runs it at its end).

**Legacy entries** (no ``sha256``) become verified entries: the digest is computed over the
entry as read. That is done only when the packed line serves exactly the value the entry's own
file serves (same types, same key order, same float bits), which holds for every entry lmaudit
wrote (canonical JSON). An entry for which it would not hold stays in its own file, unchanged,
and is listed (``left_loose``); so does an entry whose own file and pack line disagree (the
cache serves the pack line, or the file when the caller's shape check rejects the line).
Damaged entries are left in place and listed (``invalid``), or removed when ``keep`` excludes
their key; damaged pack lines go with their pack. Other files (moved-aside ``*.invalid-*``
entries, the ``served/`` records of what an ``openai`` server served
(:mod:`lmaudit.backends.openai.served`), anything lmaudit did not write) are never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmaudit.errors import CacheBusy, InputError, InvalidEntry
from lmaudit.provenance.cache import CLAIMS, entry_digest, parse_entry
from lmaudit.provenance.digest import canonical_json
from lmaudit.provenance.io import atomic_write_bytes, atomic_write_text, read_utf8
from lmaudit.provenance.packs import Packs, fsync_dir, pack_body

if TYPE_CHECKING:
    from lmaudit.provenance.cache import ResponseCache

#: A pack grows to at most this many bytes (a larger single entry is a pack of its own).
MAX_PACK_BYTES = 8 * 2**20
#: The run file listing every cache key a measurement read or wrote, one a line, sorted.
KEYS_FILE = "cache_keys.txt"

_FAN = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")
_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass
class CompactReport:
    root: str
    entries: int = 0  # entries in the packs afterwards
    packs: int = 0  # pack files afterwards
    packed: int = 0  # entries moved from their own files into packs
    verified: int = 0  # of those, legacy entries that became verified
    dropped: int = 0  # entries removed (key not in keep)
    written: int = 0  # pack files written (0: the folder was already compact)
    removed: int = 0  # files removed (entries' own files, old packs, leftovers of killed writers)
    left_loose: list[str] = field(default_factory=list)  # kept in their own files (see module doc)
    invalid: list[str] = field(default_factory=list)  # damaged entries left in place or dropped

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        out = (
            f"{self.root}: {self.entries} entries in {self.packs} pack(s); {self.packed} moved into packs "
            f"({self.verified} legacy entries verified), {self.dropped} dropped, "
            f"{self.written} pack(s) written, {self.removed} file(s) removed"
        )
        if self.left_loose:
            out += f"; {len(self.left_loose)} left in their own files (e.g. {self.left_loose[0]})"
        if self.invalid:
            out += f"; {len(self.invalid)} damaged (e.g. {self.invalid[0]})"
        return out


def _remove(path: Path) -> None:
    """Remove one file (the step a crash test interrupts)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


@contextlib.contextmanager
def _claims_locked(root: Path) -> Iterator[None]:
    """Hold the ``claims`` folder's lock (the one :meth:`ResponseCache.claim_many` takes)."""
    folder = root / CLAIMS
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _identical(a: Any, b: Any) -> bool:
    """The same JSON value, down to types, key order and float bits."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def _pack_line(raw: bytes, key: str) -> tuple[bytes | None, bool]:
    """An entry's line in a pack (verified, canonical), or None when that line would serve
    another value than ``raw`` does; and whether ``raw`` was verified. InvalidEntry when ``raw``
    cannot be served."""
    value, verified = parse_entry(raw, key)
    entry = {k: v for k, v in json.loads(raw).items() if k != "sha256"}
    try:
        entry["sha256"] = entry_digest(entry)
        line = canonical_json(entry).encode("utf-8")
        again, _ = parse_entry(line, key)
    except (ValueError, InvalidEntry):  # e.g. a number too large for a float
        return None, verified
    return (line if _identical(value, again) else None), verified


def _from_packs(
    packs: Packs, keep: set[str] | None, report: CompactReport
) -> tuple[dict[str, bytes], set[str]]:
    """The line each key of the packs is served from (the first that parses, as a read), and
    the keys dropped."""
    lines: dict[str, bytes] = {}
    dropped: set[str] = set()
    for key, where in sorted(packs.index().items()):
        if keep is not None and key not in keep:
            dropped.add(key)
            continue
        for loc in where:
            try:
                raw = packs.read(loc)
                parse_entry(raw, key)
            except (OSError, InvalidEntry):
                report.invalid.append(packs.describe(key, loc))
                continue
            lines[key] = raw
            break
    return lines, dropped


def _entry_files(root: Path) -> Iterator[Path]:
    for fan in sorted(root.iterdir()):
        if _FAN.fullmatch(fan.name) and fan.is_dir():
            for f in sorted(fan.iterdir()):
                if _ENTRY.fullmatch(f.name) and f.name.startswith(fan.name):
                    yield f


def _same_value(a: bytes, b: bytes, key: str) -> bool:
    try:
        return _identical(parse_entry(a, key)[0], parse_entry(b, key)[0])
    except InvalidEntry:
        return False


def _leftovers(root: Path, packs: Packs) -> list[Path]:
    """Files of writers that were killed: temporary files, stale per-key claims (a live claim
    refused the compaction before this is called)."""
    found = sorted(packs.folder.glob(".*.tmp")) if packs.folder.is_dir() else []
    for fan in sorted(root.iterdir()):
        if _FAN.fullmatch(fan.name) and fan.is_dir():
            found += sorted(fan.glob(".*.tmp")) + sorted(fan.glob("*.claim"))
    return found


def _write(packs: Packs, lines: dict[str, bytes], report: CompactReport) -> set[str]:
    """Write the packs holding ``lines`` (sorted by key) that are not there yet, durably."""
    chunks: list[list[bytes]] = [[]]
    size = 0
    for key in sorted(lines):
        line = lines[key]
        if chunks[-1] and size + len(line) + 1 > MAX_PACK_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(line)
        size += len(line) + 1
    names: set[str] = set()
    created = not packs.folder.is_dir()
    for chunk in chunks:
        if not chunk:
            continue
        name, body = pack_body(chunk)
        names.add(name)
        path = packs.folder / name
        with contextlib.suppress(OSError):
            if path.read_bytes() == body:
                continue  # already there (a name is its content's digest; the bytes are checked)
        atomic_write_bytes(path, body, fsync=True)
        report.written += 1
    if report.written:
        fsync_dir(packs.folder)
        if created:
            fsync_dir(packs.folder.parent)
    report.entries, report.packs = len(lines), len(names)
    return names


def compact(cache: ResponseCache, keep: set[str] | None = None) -> CompactReport:
    """Rewrite ``cache``'s folder as packs, keeping only the keys in ``keep`` when given (module
    docstring); CacheBusy while claims are held. ``cache`` indexes the new packs afterwards."""
    cache.reload_packs()  # no pack file of its own stays open while the packs are rewritten
    try:
        return _compact(cache, keep)
    finally:
        cache.reload_packs()


def _compact(cache: ResponseCache, keep: set[str] | None) -> CompactReport:
    root = cache.root
    if not root.is_dir():
        raise InputError(f"{root}: no cache folder there")
    report = CompactReport(str(root))
    with _claims_locked(root):
        busy = cache.live_claims()
        if busy:
            raise CacheBusy(
                f"{root}: {len(busy)} live claim(s), e.g. {busy[0]}: a process is filling this cache; "
                "compact it once that run has finished"
            )
        packs = Packs(root)
        old = set(packs.names())
        lines, dropped = _from_packs(packs, keep, report)
        remove: list[Path] = []
        for f in _entry_files(root):
            key = f.name[:-5]
            if keep is not None and key not in keep:
                dropped.add(key)
                remove.append(f)
                continue
            try:
                raw = f.read_bytes()
                line, verified = _pack_line(raw, key)
            except (OSError, InvalidEntry) as e:
                report.invalid.append(f"{f} ({e})")
                continue
            if key in lines:  # served from its pack: the file goes when it holds the same value
                if _same_value(raw, lines[key], key):
                    remove.append(f)
                else:
                    report.left_loose.append(str(f))
            elif line is None:
                report.left_loose.append(str(f))
            else:
                lines[key] = line
                remove.append(f)
                report.packed += 1
                report.verified += not verified
        report.dropped = len(dropped)
        new = _write(packs, lines, report)
        packs.close()
        # nothing was removed before this point: every entry kept is now in a durable pack
        gone = [packs.folder / n for n in sorted(old - new)] + remove + _leftovers(root, packs)
        for path in gone:
            _remove(path)
        report.removed = len(gone)
        for fan in root.iterdir():
            if _FAN.fullmatch(fan.name) and fan.is_dir():
                with contextlib.suppress(OSError):
                    fan.rmdir()  # only when empty
    return report


# -- the keys a run used ---------------------------------------------------------------------


def write_keys(path: Path, keys: set[str]) -> Path:
    """Write :data:`KEYS_FILE`: the keys, sorted, one a line."""
    return atomic_write_text(path, "".join(f"{k}\n" for k in sorted(keys)))


def read_keys(path: str | Path) -> set[str]:
    """The keys of a key list (one a line; blank lines and ``#`` comments ignored), or of the
    run whose directory or ``measurements.jsonl`` is given (its :data:`KEYS_FILE`)."""
    p = Path(path)
    if p.is_dir() or p.name == "measurements.jsonl":
        p = (p if p.is_dir() else p.parent) / KEYS_FILE
        if not p.exists():
            raise InputError(f"{p}: not found (the measure stage writes it; measure the run again)")
    text = read_utf8(p)
    keys: set[str] = set()
    for n, line in enumerate(text.splitlines(), start=1):
        word = line.split("#", 1)[0].strip()
        if not word:
            continue
        if not _KEY.fullmatch(word):
            raise InputError(f"{p}: line {n}: {word[:80]!r} is not a cache key (64 lowercase hex digits)")
        keys.add(word)
    return keys


def after_measure(cache: ResponseCache, run_dir: Path, *, compact_cache: bool) -> dict[str, Any]:
    """At the end of a completed measurement: write the run's :data:`KEYS_FILE`, and with
    ``compact_cache`` compact the cache to exactly those keys. For the audit record's cache section."""
    write_keys(run_dir / KEYS_FILE, cache.used_keys)
    out: dict[str, Any] = {"used_keys": len(cache.used_keys)}
    if compact_cache:
        try:
            report = compact(cache, keep=set(cache.used_keys))
        except CacheBusy as e:
            print(f"warning: cache not compacted: {e}")
            out["compacted"] = {"refused": str(e)}
        else:
            print(report.summary())
            out["compacted"] = {k: v for k, v in report.as_dict().items() if k != "root"}
    return out
