"""What an ``openai`` server says it serves, recorded beside the response cache and checked.

The backend's identity names the model as configured (``model``, ``revision`` ...), not what
the server behind ``base_url`` loaded, and a server is not needed to re-run from a cache, so
the identity cannot ask it. Instead, the first time a server answers for an identity, what it
reported is recorded in the cache folder, ``served/<identity digest>.json``:

* ``models``: the entry of ``GET <base_url>/models`` whose id is ``model`` (every entry when
  none is), each as its ``id`` and, where given, its ``root`` (vLLM: the weights it loaded);
* ``model`` and ``system_fingerprint``: those fields of the first answer, where given.

Before the cache serves any answer (:meth:`ServedCheck.attach`, called by
:class:`~lmaudit.backends.cached.CachedBackend`), the server is asked for its listing; a
listing, or later an answer's ``model``, that differs from the record is refused with one
BackendError naming both. A server that cannot be reached is not needed for cached answers:
the run goes on, and the record says what served them. A changed ``system_fingerprint`` alone
is logged, not refused (hosted APIs change it with their serving setup, llama.cpp's is its
build). No record is written while everything is served from the cache: its answers may
predate records and come from another server.

The record is written once (the first writer wins, created with ``os.link``) and carries a
sha256 of its content like a cache entry; a damaged record is reported, not used, and written
again at the next answer. Compaction never touches it (:mod:`lmaudit.provenance.compact`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lmaudit.errors import BackendError, ServerUnreachable
from lmaudit.provenance.cache import entry_digest
from lmaudit.provenance.digest import canonical_json
from lmaudit.provenance.jsoncheck import bounded_loads

log = logging.getLogger(__name__)

SERVED = "served"
#: ``{"models": [{"id", "root"?}] | None, "model": str | None, "system_fingerprint": str | None}``
Served = dict[str, Any]


def listed(data: Any, model: str) -> list[dict[str, str]] | None:
    """The models a ``/models`` answer lists (the one named ``model`` when listed), or None
    when it lists none."""
    entries = data.get("data") if isinstance(data, dict) else None
    found = (
        [e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]
        if isinstance(entries, list)
        else []
    )
    if not found:
        return None
    out: list[dict[str, str]] = []
    for e in [e for e in found if e["id"] == model] or found:
        item = {"id": e["id"]}
        if isinstance(e.get("root"), str) and e["root"] != e["id"]:
            item["root"] = e["root"]
        if item not in out:
            out.append(item)
    return sorted(out, key=canonical_json)


def show(served: Served) -> str:
    """What a server reported, in words."""
    parts = []
    if served.get("models") is not None:
        ids = [m["id"] + (f" (root {m['root']})" if m.get("root") else "") for m in served["models"]]
        parts.append(f"models {ids}")
    for field in ("model", "system_fingerprint"):
        if served.get(field) is not None:
            parts.append(f"{field} {served[field]!r}")
    return ", ".join(parts) or "nothing about its model"


class ServedCheck:
    """One backend's record of what its server serves, and the checks against it."""

    def __init__(self, model: str, where: str) -> None:
        self.model = model
        self.where = where  # the server, redacted
        self.root: Path | None = None  # the cache folder
        self.path: Path | None = None
        self.digest = ""
        self.record: Served | None = None
        self.reported: Served = {"models": None, "model": None, "system_fingerprint": None}
        self._lock = threading.Lock()
        self._warned = False

    def describe(self) -> dict[str, Any]:
        """For the audit record: what the cache's answers were made with, what the server says now."""
        return {"recorded": self.record, "reported": dict(self.reported)}

    def attach(self, root: Path, digest: str, listing: Callable[[], Any]) -> None:
        """Read the record of ``digest`` in cache folder ``root`` and check the server's listing
        (``listing()``: the decoded ``/models`` answer) against it; a server that cannot be
        asked is no refusal."""
        self.root, self.digest = Path(root), digest
        self.path = self.root / SERVED / f"{digest}.json"
        self.record = self._read()
        try:
            data = listing()
        except ServerUnreachable as e:  # cached answers need no server; a request says it once
            log.debug("openai backend: not checked what %s serves (%s)", self.where, e)
            return
        except BackendError as e:
            log.warning("openai backend: not checked what %s serves (%s)", self.where, e)
            return
        self.reported["models"] = listed(data, self.model)
        self._compare(self.reported)

    def answered(self, out: dict[str, Any]) -> None:
        """Note an answer's ``model`` and ``system_fingerprint``: record them with the listing
        if nothing is recorded yet, else refuse an answer from another model."""
        now = {
            k: out.get(k) if isinstance(out.get(k), str) else None for k in ("model", "system_fingerprint")
        }
        with self._lock:
            self.reported.update({k: v for k, v in now.items() if v is not None})
            if self.path is None:
                return
            if self.record is None:
                self.record = self._write({"models": self.reported["models"], **now})
            self._compare({"models": self.reported["models"], **now})

    def _compare(self, now: Served) -> None:
        if self.record is None:
            return
        for field in ("models", "model"):
            was, is_ = self.record.get(field), now.get(field)
            if was is not None and is_ is not None and was != is_:
                raise BackendError(
                    f"openai backend: the cache {self.root} holds answers "
                    f"of this model config made with a server that reported {show(self.record)}, but "
                    f"{self.where} reports {show(now)}: set model.revision= to a string naming the weights "
                    f"it serves (part of the backend identity, so its answers are cached apart), or use "
                    f"another paths.cache (record: {self.path})"
                )
        fp, fp_now = self.record.get("system_fingerprint"), now.get("system_fingerprint")
        if fp is not None and fp_now is not None and fp != fp_now and not self._warned:
            self._warned = True
            log.warning(
                "openai backend: %s answers with system_fingerprint %r, the cache's answers were made "
                "with %r (same model; recorded in the audit record)",
                self.where,
                fp_now,
                fp,
            )

    def _read(self) -> Served | None:
        assert self.path is not None
        try:
            doc = bounded_loads(self.path.read_bytes().decode("utf-8"))
            if not isinstance(doc, dict) or doc.get("sha256") != entry_digest(doc):
                raise ValueError("content does not match its sha256 (edited or damaged)")
            if doc.get("identity") != self.digest or not isinstance(doc.get("served"), dict):
                raise ValueError("not a record of this identity")
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            log.warning(
                "served-model record %s: %s; not used, written again at the next answer", self.path, e
            )
            return None
        served: Served = doc["served"]
        return served

    def _write(self, served: Served) -> Served:
        """Record ``served`` unless another process did first (then that record is returned)."""
        assert self.path is not None
        doc: dict[str, Any] = {"identity": self.digest, "served": served}
        doc["sha256"] = entry_digest(doc)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}-{time.time_ns()}.tmp")
        tmp.write_text(canonical_json(doc), encoding="utf-8")
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            found = self._read()
            if found is not None:
                return found
            os.replace(tmp, self.path)  # a damaged record
        except OSError:  # no hard links on this file system
            os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return served
