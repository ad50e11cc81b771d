"""What an import path holds: an inspect_ai log (or a folder of them), an lm-eval samples file
(or an output folder of them), or lmaudit's own JSONL; recognised from the content, never
from the name alone, as a :class:`~lmaudit.interop.records.Found`.

Recognition reads at most the first line of a file (or its zip directory) and imports no
evaluation tool: the readers import theirs when a log is read.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.interop.records import Found
from lmaudit.provenance.io import open_input
from lmaudit.provenance.jsoncheck import bounded_loads

__all__ = ["FORMATS", "detect", "sniff"]

FORMATS = ("auto", "inspect", "lm_eval", "lmaudit")
NAMES = {
    "inspect": "an inspect_ai log",
    "lm_eval": "an lm-eval samples file",
    "lm_eval_results": "an lm-eval results file (results_<date>.json)",
    "lmaudit": "lmaudit draws JSONL",
}
_FIRST_LINE = 1 << 24  # the most bytes read to recognise a JSON Lines file by its first record
_KEY = re.compile(rb'^\s*"((?:[^"\\]|\\.)*)"\s*:')
HELP = (
    "study.import_path takes an inspect_ai log (.eval or .json) or a folder of them, an lm-eval "
    "samples file (samples_<task>_<date>.jsonl) or an output folder of them, or lmaudit draws JSONL "
    "(docs/draws.md)"
)


def _first_record(path: Path) -> tuple[bytes, Any]:
    """The first non-blank line of a file and its JSON value (None if it is not JSON)."""
    with open_input(path) as fh:
        head = fh.read(4)
        if head.startswith(b"PK\x03\x04"):
            return head, None
        fh.seek(0)
        while True:
            line = fh.readline(_FIRST_LINE)
            if not line or line.strip():
                break
    try:
        return line, bounded_loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return line, None


def _first_key(path: Path, line: bytes) -> bytes | None:
    """The first key of a JSON object too long to read whole: on its first line after the brace,
    or (pretty-printed) on one of the next lines."""
    m = _KEY.match(line.lstrip()[1:])
    if m:
        return m.group(1)
    with open_input(path) as fh:
        fh.readline(_FIRST_LINE)
        for _ in range(3):
            m = _KEY.match(fh.readline(1 << 16))
            if m:
                return m.group(1)
    return None


def sniff(path: Path) -> tuple[str, str]:
    """``(format, what was found)`` of one file: ``format`` is one of :data:`NAMES` or
    ``unknown``."""
    line, obj = _first_record(path)
    if line.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as z:
                names = set(z.namelist())
        except (zipfile.BadZipFile, OSError):
            return "unknown", "a damaged zip archive"
        if {"header.json", "_journal/start.json"} & names:
            return "inspect", NAMES["inspect"] + " (.eval)"
        return "unknown", "a zip archive that is not an inspect_ai .eval log"
    if isinstance(obj, dict):
        keys = set(obj)
        if {"doc_id", "resps"} <= keys:
            return "lm_eval", NAMES["lm_eval"]
        if {"version", "eval"} <= keys:
            return "inspect", NAMES["inspect"] + " (.json)"
        if {"results", "configs"} <= keys:
            return "lm_eval_results", NAMES["lm_eval_results"]
        if keys & {"draws", "family"}:
            return "lmaudit", NAMES["lmaudit"]
        shown = ", ".join(sorted(keys)[:6]) or "none"
        return "unknown", f"a JSON object with the fields {shown}"
    if obj is None and line.lstrip().startswith(b"{"):
        key = _first_key(path, line)
        if key == b"version":
            return "inspect", NAMES["inspect"] + " (.json)"
        if key == b"results":
            return "lm_eval_results", NAMES["lm_eval_results"]
        return "unknown", f"a JSON object whose first field is {key.decode(errors='replace')!r}" if key else (
            "a JSON object lmaudit does not recognise"
        )
    if not line.strip():
        return "unknown", "an empty file"
    return "unknown", "text that is not JSON" if obj is None else f"a JSON {type(obj).__name__}"


def _folder(path: Path, forced: str) -> Found:
    files = sorted(p for p in path.rglob("*") if p.is_file())
    samples = [p for p in files if p.name.startswith("samples_") and p.name.endswith(".jsonl")]
    logs = [
        p for p in files if p.suffix == ".eval" or (p.suffix == ".json" and not p.name.startswith("results_"))
    ]
    if forced == "lmaudit":
        raise InputError(f"{path}: a folder; study.import_format=lmaudit reads one JSONL file")
    if forced == "auto" and samples and logs:
        raise InputError(
            f"{path}: holds both inspect_ai logs ({logs[0].name}, ...) and lm-eval samples files "
            f"({samples[0].name}, ...); point study.import_path at one of them, or set study.import_format"
        )
    if forced == "lm_eval" or (forced == "auto" and samples):
        if not samples:
            raise InputError(f"{path}: no lm-eval samples files (samples_<task>_<date>.jsonl) in this folder")
        from lmaudit.interop.lm_eval_samples import list_samples

        return Found(path, "lm_eval", tuple(list_samples(path)))
    if forced == "auto" and not logs:
        raise InputError(f"{path}: no inspect_ai logs or lm-eval samples files in this folder; {HELP}")
    from lmaudit.interop.inspect_logs import list_logs

    found = list_logs(path)
    if not found:
        raise InputError(f"{path}: no inspect_ai logs (.eval or .json) in this folder")
    return Found(path, "inspect", tuple(found))


def detect(path: str | Path, forced: str = "auto") -> Found:
    """What ``path`` holds (``forced``: the format it must hold, or ``auto``); InputError naming
    the path and what was found when it is not a draws import, or not the forced format."""
    path = Path(path)
    if forced not in FORMATS:
        raise InputError(f"study: field 'import_format' = {forced!r} is not one of {', '.join(FORMATS)}")
    if not path.exists():
        raise InputError(f"{path}: file not found (study.import_path)")
    if path.is_dir():
        return _folder(path, forced)
    fmt, what = sniff(path)
    if fmt == "lm_eval_results":
        raise InputError(
            f"{path}: found {what}; it holds no answers: pass the samples_<task>_<date>.jsonl file "
            "written beside it (lm_eval --log_samples)"
        )
    if fmt == "unknown" and (
        forced == "lmaudit" or (forced == "auto" and path.suffix not in (".json", ".eval"))
    ):
        fmt = "lmaudit"  # lmaudit's own reader names the line and the field that is wrong
    if fmt == "unknown":
        raise InputError(f"{path}: not a draws import: found {what}; {HELP}")
    if forced not in ("auto", fmt):
        raise InputError(f"{path}: study.import_format={forced}, but the file is {NAMES[fmt]}")
    if fmt == "lm_eval":
        from lmaudit.interop.lm_eval_samples import files_read

        return Found(path, fmt, tuple(files_read(path)))
    if fmt == "inspect":
        from lmaudit.interop.inspect_logs import require

        require(path)  # the reader's tool is there before anything is written
    return Found(path, fmt, (path,))
