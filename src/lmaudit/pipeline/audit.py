"""The run's audit record (``audit_record.json``): one section per stage, plus the study's
own section, rewritten atomically after every update."""

from __future__ import annotations

import datetime as _dt
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from lmaudit import __version__
from lmaudit.provenance.io import atomic_write_json, read_json
from lmaudit.provenance.redact import redact_config


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_now_ms() -> str:
    """Now, to the millisecond (a run's start and end, as MLflow records them)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_ms(stamp: object) -> int | None:
    """Milliseconds since the epoch of a recorded UTC stamp (``...Z``, with or without
    fractions of a second); None when it is not one."""
    if not isinstance(stamp, str) or not stamp.endswith("Z"):
        return None
    try:
        t = _dt.datetime.fromisoformat(stamp[:-1]).replace(tzinfo=_dt.UTC)
    except ValueError:
        return None
    return round(t.timestamp() * 1000)


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict[str, Any]:
    return {"git_commit": git_commit(), "python": sys.version.split()[0], "platform": platform.platform()}


class AuditRecord:
    """Sections of a run's audit record; a record of another plan is started afresh."""

    def __init__(self, path: Path, plan_digest: str | None):
        self.path = path
        self.data: dict[str, Any] = {}
        if path.exists():
            old = read_json(path)
            if isinstance(old, dict) and (plan_digest is None or old.get("plan_digest") == plan_digest):
                self.data = old
        self.data.setdefault("schema", 1)
        self.data.setdefault("lmaudit_version", __version__)
        if plan_digest:
            self.data["plan_digest"] = plan_digest

    def update(self, section: str, value: dict[str, Any]) -> None:
        self.data[section] = value
        self.save()

    def save(self) -> None:
        """Write the record; credentials in any URL it holds are redacted."""
        self.data = redact_config(self.data)
        atomic_write_json(self.path, self.data)
