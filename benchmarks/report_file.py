"""A benchmark's JSON report written whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_report(report: dict[str, Any], path: Path) -> None:
    """``report`` as indented, key-sorted JSON at ``path`` (its folder made), written to
    ``<path>.json.tmp`` then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = path.with_suffix(".json.tmp")
    tmp_out.write_text(json.dumps(report, indent=2, sort_keys=True, default=str), encoding="utf-8")
    tmp_out.replace(path)
