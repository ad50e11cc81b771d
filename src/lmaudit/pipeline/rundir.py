"""A run directory's ownership: one run at a time (a lock held for the whole run), no run
replacing another config's plan or results without ``overwrite=true``, and a stage's outputs
replaced as a set (what derives from an earlier state is removed before anything new is written).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError, RunDirLocked
from lmaudit.provenance.io import read_json
from lmaudit.provenance.jsoncheck import bounded_loads

LOCK = ".lmaudit.lock"
ARTIFACTS = "artifacts"  # the run folder's subfolder for a study's own files
# what each stage writes; a stage removes its own earlier outputs and every later stage's first
OUTPUTS = {
    "plan": ("plan.json",),
    "measure": ("measurements.jsonl", ARTIFACTS, "cache_keys.txt"),
    "analyze": ("results.json", "metrics.json", "plots"),
    "report": ("report.html",),
}
_ORDER = ("plan", "measure", "analyze", "report")


def _holder(fd: int) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 4096).decode()
        obj = bounded_loads(text) if text.strip() else {}
        return obj if isinstance(obj, dict) else {}
    return {}


def _describe(h: dict[str, Any]) -> str:
    return f"pid {h.get('pid', '?')} on {h.get('host', '?')}, started {h.get('started_utc', '?')}"


@contextlib.contextmanager
def run_lock(out: Path, stage: str) -> Iterator[None]:
    """Hold ``<out>/.lmaudit.lock`` while the block runs. A directory held by a live process
    is refused, naming it; a lock left by a run that was killed (its process gone, so the
    kernel released its ``flock``) is taken over, and said so."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _holder(fd)
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise RunDirLocked(
                f"{out} is in use by another lmaudit run ({_describe(holder)}, stage={holder.get('stage', '?')}); "
                "wait for it to finish or choose another out_dir"
            ) from None
        try:  # the holder may have finished and removed the file between our open and flock
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    stale = _holder(fd)
    if stale:
        print(
            f"{out}: taking over the lock left by a run that ended without releasing it ({_describe(stale)})"
        )
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "stage": stage,
    }
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(me).encode())
    os.fsync(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def diff_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            out += diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]


def clear_from(out: Path, stage: str) -> list[str]:
    """Remove the outputs of ``stage`` and of every later stage; returns what was removed."""
    gone = []
    for s in _ORDER[_ORDER.index(stage) :]:
        for name in OUTPUTS[s]:
            p = out / name
            if p.is_dir():
                shutil.rmtree(p)
                gone.append(name)
            elif p.exists():
                p.unlink()
                gone.append(name)
    return gone


def _is_own(path: Path, key: str) -> bool:
    """Is ``path`` a record lmaudit wrote (a JSON object carrying ``key``)?"""
    if not path.is_file():
        return False
    try:
        doc = read_json(path)
    except InputError:
        return False
    return isinstance(doc, dict) and key in doc


def claim_folder(out: Path) -> None:
    """Refuse a run folder that already holds something and is not an lmaudit run: lmaudit
    replaces only its own records (an earlier run's ``plan.json`` or ``audit_record.json``
    marks the folder as one), so a folder of the user's own files, even ones named like
    lmaudit's (``plots/``, ``results.json``), is never cleared, with or without ``overwrite``."""
    present = sorted(p.name for p in out.iterdir() if p.name != LOCK) if out.is_dir() else []
    if not present:
        return
    if _is_own(out / "plan.json", "plan_digest") or _is_own(out / "audit_record.json", "lmaudit_version"):
        return
    shown = ", ".join(present[:8]) + (f" and {len(present) - 8} more" if len(present) > 8 else "")
    raise InputError(
        f"{out} is not an lmaudit run folder (no plan.json or audit_record.json of lmaudit's) and holds: "
        f"{shown}; lmaudit replaces only its own records, so choose a new or empty out_dir"
    )


def claim_plan(out: Path, plan_doc: dict[str, Any], *, overwrite: bool) -> bool:
    """May this run's plan go into ``out``? True when the directory holds another plan that
    ``overwrite`` lets this run replace (the caller then clears the directory). A different
    plan without ``overwrite`` is refused, naming the keys that differ; nothing is removed."""
    path = out / "plan.json"
    if not path.exists():
        return False
    old = read_json(path)
    if old.get("plan_digest") == plan_doc.get("plan_digest"):
        return False
    diffs = diff_keys(old.get("config", {}), plan_doc.get("config", {}))
    if old.get("inputs") != plan_doc.get("inputs"):
        diffs.append("inputs")
    what = ", ".join(diffs) or "rendered prompts"
    if not overwrite:
        raise InputError(
            f"{path}: this run directory holds the plan of a different config (differs in: {what}); "
            "choose another out_dir, or pass overwrite=true to replace it and its measurements, "
            "results and report"
        )
    print(f"{path}: overwrite=true: replacing a plan that differs in {what}, and everything derived from it")
    return True


def claim_results(out: Path, measurements: Path, sha256: str, *, overwrite: bool) -> None:
    """Refuse to replace ``results.json`` made from other measurements than the run directory's
    own (``measurements=`` naming another file) unless ``overwrite``."""
    path = out / "results.json"
    if not path.exists() or overwrite:
        return
    own = out / "measurements.jsonl"
    if own.exists() and own.resolve() == measurements.resolve():
        return  # the run's own measurements, re-analysed
    old = (read_json(path).get("source") or {}).get("measurements_sha256")
    if old != sha256:
        raise InputError(
            f"{path}: holds results of other measurements (source.measurements_sha256 {str(old)[:12]}, "
            f"not {sha256[:12]} of {measurements}); choose another out_dir, or pass overwrite=true"
        )
