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
``sha256``) are accepted when they parse, carry their own key and their value passes the
caller's shape check; reading never rewrites them, and the stats count them as ``legacy`` (the
audit record shows it). Such an entry has nothing to be verified against: an edit that keeps its
shape cannot be detected (the digest guards against corruption and accidental edits, not against
someone who removes it). A compaction turns them into verified entries (see below). Cache keys
are unchanged by the digest: it is stored inside the entry, not in its name.

**Packs.** Callers that store many small answers at once (a request's draws, a batch of
embeddings) write them as one *pack* (:meth:`ResponseCache.put_many`):
``packs/<sha256 of the content>.jsonl``, one verified entry per line, written atomically like an
entry; creating a file costs far more than writing a few kilobytes into one. Pack names are
content digests, so a rebuilt cache has the same files (DVC's digest of a cache folder does not
depend on when or where it was filled). The pack index (:mod:`lmaudit.provenance.packs`) is
refreshed when the ``packs`` folder changes, so entries another process packs are seen. A key in
both is served from a pack. A damaged pack line is rejected like a damaged entry.

**Compaction** (:func:`lmaudit.provenance.compact.compact`, :mod:`lmaudit.provenance.compact`) rewrites a
folder as packs only (entries sorted by key, so the same entries give the same files anywhere),
optionally keeping only the keys a run used (:attr:`ResponseCache.used_keys`: every key served
or stored through this object).

Processes sharing a cache do not duplicate work: before asking a backend, a process
*claims* each missing key (``<key>.claim``, created with O_EXCL, so exactly one process
wins); others wait for the entry. A claim whose owner died (same host, pid gone) or that is
older than ``claim_ttl_s`` is taken over. :meth:`claim_many` claims a whole set of keys with
one file (``claims/<pid>-<ns>.claim``, listing them), under an exclusive ``flock`` of the
``claims`` folder, so exactly one process gets each key; :meth:`claimed` sees both kinds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lmaudit.errors import InvalidEntry, StrictJsonError
from lmaudit.provenance.digest import canonical_json, sha256_text
from lmaudit.provenance.io import atomic_write_text
from lmaudit.provenance.jsoncheck import bounded_loads, json_type
from lmaudit.provenance.packs import Packs

log = logging.getLogger(__name__)


CLAIMS = "claims"


def cache_key(backend_digest: str, payload: dict[str, Any]) -> str:
    return sha256_text(canonical_json({"backend": backend_digest, "request": payload}))


def entry_digest(entry: dict[str, Any]) -> str:
    """The digest an entry carries: of its canonical JSON without the ``sha256`` field."""
    return sha256_text(canonical_json({k: v for k, v in entry.items() if k != "sha256"}))


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
        entry = bounded_loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise InvalidEntry(f"not valid JSON ({e.msg}, line {e.lineno} column {e.colno})") from None
    except StrictJsonError as e:
        raise InvalidEntry(str(e)) from None
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
    """What one process's cache object saw. ``misses`` counts each key not found once, however
    often it is looked up again (after claiming it, or while another process answers it), so
    ``misses - writes`` is what other processes answered meanwhile (or what failed)."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    invalid: int = 0  # entries rejected (reported, asked again)
    legacy: int = 0  # hits on entries without a digest (accepted unverified)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class ResponseCache:
    root: Path
    stats: CacheStats = field(default_factory=CacheStats)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self._rejected: set[str] = set()
        self._legacy: set[str] = set()
        self._missed: set[str] = set()
        self._packs = Packs(self.root)
        self._group_owners: dict[str, tuple[str, frozenset[str]]] = {}  # claim file -> (owner, keys)
        #: every key this object served (a hit) or stored: what a run read or wrote
        self.used_keys: set[str] = set()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, check: Callable[[Any], Any] | None = None) -> Any | None:
        """The stored value (passed through ``check``, which raises ValueError, TypeError or
        KeyError on a value of the wrong shape), or None when absent or rejected. The packs
        that hold the key are tried first, then the key's own file."""
        for where in self._packs.locations(key):
            shown = self._packs.describe(key, where)
            try:
                raw = self._packs.read(where)
            except FileNotFoundError:  # rewritten by a compaction: its lines are in the new packs
                continue
            except OSError as e:
                self._reject(key, shown, f"unreadable ({e.strerror or type(e).__name__})")
                self._packs.forget(key, where)
                continue
            ok, value = self._serve(key, raw, shown, check)
            if ok:
                return value
            self._packs.forget(key, where)  # not tried again by this process
        p = self._path(key)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            self._miss(key)
            return None
        except OSError as e:  # a directory, no permission ...
            self._reject(key, p, f"unreadable ({e.strerror or type(e).__name__})")
            self._miss(key)
            return None
        ok, value = self._serve(key, data, p, check)
        if not ok:
            self._miss(key)
        return value

    def _miss(self, key: str) -> None:
        if key not in self._missed:
            self._missed.add(key)
            self.stats.misses += 1

    def close(self) -> None:
        """Close the pack files held open for reading (reopened when needed)."""
        self._packs.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def _serve(
        self, key: str, raw: bytes, where: Path | str, check: Callable[[Any], Any] | None
    ) -> tuple[bool, Any]:
        try:
            value, verified = parse_entry(raw, key)
            if check is not None:
                value = check(value)
        except InvalidEntry as e:
            self._reject(key, where, str(e))
            return False, None
        except (KeyError, TypeError, ValueError) as e:
            self._reject(key, where, f"value of the wrong shape ({type(e).__name__}: {e})")
            return False, None
        if not verified and key not in self._legacy:
            self._legacy.add(key)
            self.stats.legacy += 1
        self.stats.hits += 1
        self.used_keys.add(key)
        return True, value

    def _reject(self, key: str, path: Path | str, why: str) -> None:
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
        self.used_keys.add(key)
        self.stats.writes += 1

    def put_many(self, items: Sequence[tuple[str, Any]]) -> None:
        """Store ``(key, value)`` pairs as one pack (module docstring): one file for them all."""
        if not items:
            return
        lines: list[tuple[str, bytes]] = []
        for key, value in items:
            entry: dict[str, Any] = {"key": key, "value": value}
            entry["sha256"] = entry_digest(entry)
            lines.append((key, canonical_json(entry).encode("utf-8")))
        self._packs.write(lines)
        for key, _ in items:
            if key in self._rejected:
                # a rejected per-key entry would shadow the new one: move it out of the way
                p = self._path(key)
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    p.rename(p.with_name(f"{p.name}.invalid-{time.time_ns()}"))
                self._rejected.discard(key)
        self.used_keys.update(key for key, _ in items)
        self.stats.writes += len(items)

    def __contains__(self, key: str) -> bool:
        return self._path(key).exists() or bool(self._packs.locations(key))

    def reload_packs(self) -> None:
        """Close the pack files and index them afresh (after :func:`lmaudit.provenance.compact.compact`
        rewrote them)."""
        self._packs.close()
        self._packs = Packs(self.root)

    # -- claims ---------------------------------------------------------------------------
    claim_ttl_s: float = 3600.0

    def _claim_path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.claim"

    def claim(self, key: str) -> bool:
        """Try to become the one process that computes ``key``; False if another holds it."""
        if key in self._claimed_in_groups():
            return False
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
        if p.exists() and not self._stale(p):
            return True
        return key in self._claimed_in_groups()

    def claim_many(self, keys: Sequence[str]) -> tuple[str | None, set[str]]:
        """Claim, with one file, every key of ``keys`` that no live claim holds.

        Returns the claim's name (for :meth:`release_many`; None when nothing was granted)
        and the granted keys. The claims folder is locked (``flock``) while the live claims
        are read and the new one written, so two processes never get the same key."""
        folder = self.root / CLAIMS
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = self._claimed_in_groups()
            granted = [k for k in dict.fromkeys(keys) if k not in held and not self._claim_held(k)]
            if not granted:
                return None, set()
            name = f"{os.getpid()}-{time.time_ns()}.claim"
            record = {"pid": os.getpid(), "host": socket.gethostname(), "time": time.time(), "keys": granted}
            atomic_write_text(folder / name, json.dumps(record), fsync=False)
            return name, set(granted)
        finally:
            os.close(fd)  # releases the lock

    def release_many(self, name: str | None) -> None:
        if name is None:
            return
        with contextlib.suppress(FileNotFoundError):
            (self.root / CLAIMS / name).unlink()
        self._group_owners.pop(name, None)

    def live_claims(self) -> list[Path]:
        """The claim files (per key and group) whose owner is alive; stale group claims are removed."""
        self._claimed_in_groups()  # lists the group claims, removing stale ones
        found = [self.root / CLAIMS / n for n in sorted(self._group_owners)]
        found += [p for p in sorted(self.root.glob("??/*.claim")) if not self._stale(p)]
        return found

    def _claim_held(self, key: str) -> bool:
        p = self._claim_path(key)
        return p.exists() and not self._stale(p)

    def _claimed_in_groups(self) -> frozenset[str]:
        """Every key held by a live group claim (stale claims are removed)."""
        folder = self.root / CLAIMS
        try:
            names = [n for n in os.listdir(folder) if n.endswith(".claim") and not n.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            return frozenset()
        held: set[str] = set()
        for name in names:
            known = self._group_owners.get(name)
            if known is None:  # claim files never change: read each once
                try:
                    record = json.loads((folder / name).read_text())
                    owner = f"{int(record['pid'])} {record['host']} {float(record['time'])}"
                    known = (owner, frozenset(str(k) for k in record["keys"]))
                except FileNotFoundError:
                    continue
                except (ValueError, KeyError, TypeError):
                    continue  # not a claim this class wrote
                self._group_owners[name] = known
            if self._stale_owner(known[0]):
                with contextlib.suppress(FileNotFoundError):
                    (folder / name).unlink()
                self._group_owners.pop(name, None)
                continue
            held |= known[1]
        for gone in set(self._group_owners) - set(names):
            del self._group_owners[gone]
        return frozenset(held)

    def _stale(self, p: Path) -> bool:
        try:
            owner = p.read_text()
        except FileNotFoundError:
            return False  # gone
        return self._stale_owner(owner)

    def _stale_owner(self, owner: str) -> bool:
        try:
            pid_s, host, t = owner.split()
            float(t)
        except ValueError:
            return False  # being written right now
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
