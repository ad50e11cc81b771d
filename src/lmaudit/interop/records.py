"""What the readers of other tools' logs hand to a study, and the error they share.

The readers (:mod:`~lmaudit.interop.inspect_logs`, :mod:`~lmaudit.interop.lm_eval_samples`) map
a log onto one :class:`LogSource` and its :class:`LogSequence` records (each a list of :class:`Draw`);
:func:`~lmaudit.interop.detect.detect` says what an import path holds as a :class:`Found`.
The judge-log readers (:mod:`~lmaudit.interop.alpaca_eval`, :mod:`~lmaudit.interop.fastchat`)
start their design row with :func:`judge_design_head`.
This module imports no reader and no evaluation tool, so each of them can import it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from lmaudit.errors import InputError
from lmaudit.provenance.digest import file_sha256

__all__ = ["Draw", "Found", "LogSequence", "LogSource", "interop_missing", "judge_design_head", "tool_module"]


def interop_missing(tool: str, path: str | Path) -> InputError:
    """The one-line error for a log whose tool is not installed."""
    return InputError(f"{path}: reading {tool} logs needs {tool}: pip install 'lmaudit[interop]'")


def tool_module(module: str, tool: str, path: str | Path) -> ModuleType:
    """The evaluation tool's ``module``, imported when a log at ``path`` is read; the one-line
    :func:`interop_missing` error when the tool is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise interop_missing(tool, path) from None


def judge_design_head(
    fmt: str, path: Path, judges: Sequence[str], isolation: str, note: str
) -> dict[str, Any]:
    """The fields every imported judge log's design row starts with: its format, the file and
    its digest, and how the judge ran (one judge by name, several as a list)."""
    return {
        "kind": "design",
        "source": "import",
        "format": fmt,
        "import_path": str(path),
        "files": {fmt: {"path": str(path), "sha256": file_sha256(path)}},
        "execution": {
            "judge": judges[0] if len(judges) == 1 else judges,
            "isolation": isolation,
            "note": note,
        },
        "isolation": isolation,
    }


@dataclass(frozen=True)
class Draw:
    """One answer of a sequence at its place (``position``: inspect's epoch, lm-eval's index in
    ``resps``); ``excluded`` says why it is not an independent draw (None: it is one)."""

    position: int
    text: str
    excluded: str | None = None


@dataclass
class LogSequence:
    """One prompt's answers in draw order, as a log records them."""

    family: str
    source: str
    condition: str
    probe: str
    draws: list[Draw]
    meta: dict[str, Any] = field(default_factory=dict)
    prompt: str | None = None  # the prompt's text as the log records it (None: not recorded)


@dataclass
class LogSource:
    """One eval run as a log records it, and what the log gets wrong for draw-to-draw analysis:
    ``facts`` (settings read from the log), ``issues`` (code -> {count, action, detail}) and
    ``scores`` (the primary score per sample, for the error bars: :mod:`lmaudit.interop.scores`;
    None when the log holds none)."""

    source: str
    family: str
    format: str
    files: list[str]
    facts: dict[str, Any] = field(default_factory=dict)
    issues: dict[str, dict[str, Any]] = field(default_factory=dict)
    scores: dict[str, Any] | None = None

    def issue(self, code: str, count: int, action: str, detail: str) -> None:
        if count:
            self.issues[code] = {"count": int(count), "action": action, "detail": detail}


@dataclass(frozen=True)
class Found:
    """What ``path`` holds: its format and the files a reader will read, in a fixed order."""

    path: Path
    format: str
    files: tuple[Path, ...]
