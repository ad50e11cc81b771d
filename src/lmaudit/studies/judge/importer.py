"""Judge results recorded elsewhere, re-analysed here (docs/judge.md, "Importing results").

An import folder holds one JSON file per condition, ``results_<condition>.json``: a list of
records, or an object whose ``results`` field is that list. Each record::

    {"prompt_id": "P001", "winner": "B", "confidence": 0.99, "reason": "..."}

Required: ``prompt_id`` (string), ``winner`` (the label as recorded, displayed orientation),
``confidence`` (number or null) and ``reason`` (string or null). Optional: ``replicate``
(integer >= 0, default 0) and ``evaluation_id`` (carried along). A record whose winner is not
exactly ``A``, ``B`` or ``TIE`` or whose confidence is not a number in [0, 1] is kept and
marked invalid, never coerced. An optional ``execution.json`` describes the execution:
``judge``, ``isolation`` (``fresh`` | ``shared`` | ``unknown``), ``date``, ``note``.

``study.import_path`` also takes a FastChat pairwise judgment file or AlpacaEval annotations
(:mod:`lmaudit.interop.fastchat`, :mod:`lmaudit.interop.alpaca_eval`); :func:`import_source`
recognises the format from the content (or takes ``study.import_format``) and
:func:`import_rows` reads any of the three.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import check_fields, iter_jsonl, open_input, read_json
from lmaudit.studies.judge.config import JudgeStudyConfig
from lmaudit.studies.judge.packets import Condition
from lmaudit.terminal import printable

__all__ = [
    "ImportSource",
    "detect_format",
    "import_files",
    "import_rows",
    "import_source",
    "read_execution",
    "read_import",
]

REQUIRED = ("prompt_id", "winner", "confidence", "reason")
OPTIONAL = ("replicate", "evaluation_id")
ISOLATION = ("fresh", "shared", "unknown")


def import_files(folder: str | Path, conds: Sequence[Condition]) -> dict[str, Path]:
    """The result file of each condition present in ``folder`` (at least one must be)."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"{root}: not a folder (study.import_dir)")
    found = {c.id: root / f"results_{c.id}.json" for c in conds if (root / f"results_{c.id}.json").exists()}
    if not found:
        names = ", ".join(f"results_{c.id}.json" for c in conds)
        raise InputError(f"{root}: no result file for any configured condition (looked for {names})")
    left = sorted(p.name for p in root.glob("results_*.json") if p.stem.removeprefix("results_") not in found)
    if left:
        print(
            printable(
                f"warning: {root}: {', '.join(left)} not analysed: the selected condition set holds only "
                f"{', '.join(c.id for c in conds)} (judge/condition=all includes the position swap SWAP)"
            ),
            file=sys.stderr,
        )
    return found


def read_execution(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / "execution.json"
    if not path.exists():
        return {"isolation": "unknown"}
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a JSON object")
    iso = doc.get("isolation", "unknown")
    if iso not in ISOLATION:
        raise InputError(f"{path}: field 'isolation' = {iso!r} is not one of {', '.join(ISOLATION)}")
    return {str(k): v for k, v in doc.items()}


def _record(obj: Any, cond: Condition, where: str, execution: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object")
    check_fields(obj, where, REQUIRED, OPTIONAL)
    pid = obj["prompt_id"]
    if not isinstance(pid, str) or not pid:
        raise InputError(f"{where}: field 'prompt_id' must be a non-empty string")
    rep = obj.get("replicate", 0)
    if isinstance(rep, bool) or not isinstance(rep, int) or rep < 0:
        raise InputError(f"{where}: field 'replicate' must be an integer >= 0, got {rep!r}")
    reason = obj["reason"]
    if reason is not None and not isinstance(reason, str):
        raise InputError(f"{where}: field 'reason' must be a string or null")
    winner, conf = obj["winner"], obj["confidence"]
    errors = []
    if winner not in ("A", "B", "TIE"):
        errors.append(f"winner {winner!r} is not A, B or TIE")
    ok_conf = not isinstance(conf, bool) and isinstance(conf, int | float) and 0.0 <= float(conf) <= 1.0
    if conf is not None and not ok_conf:
        errors.append(f"confidence {conf!r} is not a number in [0, 1]")
    valid = not errors
    w = winner if valid else None
    original = w if (w is None or not cond.swap or w == "TIE") else ("B" if w == "A" else "A")
    return {
        "kind": "judgment",
        "source": "import",
        "condition": cond.id,
        "item": pid,
        "replicate": rep,
        "attempt": 0,
        "final": True,
        "seed": None,
        "swap": cond.swap,
        "wrap": sorted(cond.wrap),
        "isolation": execution.get("isolation", "unknown"),
        "raw": None,
        "recorded": {k: obj[k] for k in (*REQUIRED, *OPTIONAL) if k in obj},
        "valid": valid,
        "error": "; ".join(errors) or None,
        "winner": w,
        "winner_original": original,
        "confidence": float(conf) if valid and conf is not None else None,
        "reason": reason,
    }


def read_import(folder: str | Path, conds: Sequence[Condition]) -> list[dict[str, Any]]:
    """Measurement rows (``kind: judgment``, ``source: import``) from an import folder, preceded
    by one ``kind: design`` row describing the execution."""
    files = import_files(folder, conds)
    execution = read_execution(folder)
    by_id = {c.id: c for c in conds}
    rows: list[dict[str, Any]] = [
        {
            "kind": "design",
            "source": "import",
            "import_dir": str(folder),
            "execution": execution,
            "isolation": execution.get("isolation", "unknown"),
            "files": {cid: {"path": str(p), "sha256": file_sha256(p)} for cid, p in files.items()},
        }
    ]
    for cid, path in files.items():
        doc = read_json(path)
        records = doc.get("results") if isinstance(doc, dict) else doc
        if not isinstance(records, list):
            raise InputError(f"{path}: expected a list of records (or an object with a 'results' list)")
        seen: dict[tuple[str, int], int] = {}
        for i, obj in enumerate(records):
            row = _record(obj, by_id[cid], f"{path}: record {i}", execution)
            key = (row["item"], row["replicate"])
            if key in seen:
                raise InputError(
                    f"{path}: record {i}: prompt {key[0]!r} replicate {key[1]} repeats record {seen[key]}"
                )
            seen[key] = i
            rows.append(row)
    return rows


FORMATS = ("lmaudit", "fastchat", "alpaca_eval")


@dataclass(frozen=True)
class ImportSource:
    """What a study imports: the path, its format, and the setting that named it."""

    path: Path
    format: str  # lmaudit | fastchat | alpaca_eval
    setting: str  # study.import_dir | study.import_path
    answers: Path | None = None  # study.answers_path: FastChat model_answer files


def detect_format(path: str | Path) -> str:
    """``lmaudit`` for a folder; for a file, ``alpaca_eval`` (a JSON array or annotation lines)
    or ``fastchat`` (judgment lines), read from its first record."""
    p = Path(path)
    if p.is_dir():
        return "lmaudit"
    with open_input(p) as fh:  # InputError naming the file when it is missing or not a file
        head = fh.read(4096).lstrip()
    if head.startswith(b"["):
        return "alpaca_eval"
    from lmaudit.interop import alpaca_eval, fastchat

    first = next(iter_jsonl(p), None)
    if first is None:
        raise InputError(f"{p}: empty (study.import_path)")
    lineno, obj = first
    if fastchat.looks_like(obj):
        return "fastchat"
    if alpaca_eval.looks_like(obj):
        return "alpaca_eval"
    if "prompt_id" in obj and "winner" in obj:
        raise InputError(f"{p}: an lmaudit result file; give its folder (study.import_path=<folder>)")
    raise InputError(
        f"{p}: line {lineno}: not a recognised import (fields {sorted(obj)}): expected a folder of "
        "lmaudit result files, FastChat pairwise judgments (g1_winner, g2_winner) or AlpacaEval "
        "annotations (output_1, output_2, preference)"
    )


def import_source(s: JudgeStudyConfig) -> ImportSource | None:
    """The study's import (``None``: it judges); the format as configured or recognised."""
    if s.import_dir and s.import_path:
        raise InputError(
            "study.import_dir and study.import_path are both set: give study.import_path alone "
            "(it takes a folder or a file)"
        )
    if not (s.import_dir or s.import_path):
        if s.import_format != "auto":
            raise InputError(f"study.import_format={s.import_format} needs study.import_path")
        if s.answers_path:
            raise InputError("study.answers_path needs study.import_path (a FastChat judgment file)")
        return None
    setting = "study.import_dir" if s.import_dir else "study.import_path"
    p = Path(str(s.import_dir or s.import_path))
    if not p.exists():
        raise InputError(f"{p}: not found ({setting})")
    if s.import_dir and not p.is_dir():
        raise InputError(f"{p}: not a folder (study.import_dir; study.import_path also takes a file)")
    fmt = detect_format(p) if s.import_format == "auto" else s.import_format
    if s.import_dir and fmt != "lmaudit":
        raise InputError(f"study.import_format={fmt} reads a file: give it as study.import_path")
    if (fmt == "lmaudit") != p.is_dir():
        want = "a folder" if fmt == "lmaudit" else "a file"
        raise InputError(f"{p}: study.import_format={fmt} reads {want} ({setting})")
    if s.answers_path and fmt != "fastchat":
        raise InputError(
            f"study.answers_path is for a FastChat import; {p} is {fmt} "
            "(AlpacaEval annotations hold their outputs)"
        )
    return ImportSource(p, fmt, setting, Path(s.answers_path) if s.answers_path else None)


def import_rows(src: ImportSource, conds: Sequence[Condition]) -> list[dict[str, Any]]:
    """Measurement rows of any import format (a design row first)."""
    if src.format == "lmaudit":
        return read_import(src.path, conds)
    from lmaudit.interop import alpaca_eval, fastchat

    if src.format == "fastchat":
        return fastchat.read_rows(src.path, src.answers)
    return alpaca_eval.read_rows(src.path)
