"""Free lists from inspect_ai logs (docs/interop.md, "choir"): an ensemble measured elsewhere.

Each sample and epoch of a log is one list: its completion, extracted by the study's rule
extractor exactly as an imported ``raw`` answer is. The member is the model the log names
(``eval.model``), the question the sample (``<task>/<sample id>``, its text the sample's input),
the template the task, the generation the epoch (from 0), the persona ``none``. The temperature
is the one the log records (the eval's generate config or its model calls); a log that records
none takes ``study.import_temperature``, and without it is refused, since a list's temperature
is part of its cell. Epochs that are not independent lists (answered from inspect's cache, or
ended in an error) are left out; they and every other issue of the log (a fixed seed, greedy
calls) go to ``log_audit`` rows, as in the draws study.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.interop.audit import AUDIT_KIND, audit_row, read_logs
from lmaudit.interop.detect import detect, sniff
from lmaudit.interop.records import Found, LogSequence, LogSource
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.data import NO_PERSONA
from lmaudit.studies.choir.extract import extract_items

__all__ = ["AUDIT_KIND", "foreign_lists", "log_import"]

FORMATS = ("auto", "inspect", "lmaudit")


def log_import(s: ChoirStudyConfig) -> Found | None:
    """The inspect log(s) ``study.import_path`` names, or None for choir's own JSONL import;
    InputError when the format is forced and the path holds another, or for an lm-eval file."""
    fmt = s.import_format
    if fmt not in FORMATS:
        raise InputError(f"study: field 'import_format' = {fmt!r} is not one of {', '.join(FORMATS)}")
    if not s.import_path or fmt == "lmaudit":
        return None
    p = Path(s.import_path)
    if not p.exists():
        raise InputError(f"{p}: file not found (study.import_path)")
    if p.is_file():
        found, what = sniff(p)
        if found != "inspect":
            if fmt == "inspect" or found.startswith("lm_eval"):
                raise InputError(
                    f"{p}: {what}, not an inspect_ai log (choir imports inspect_ai logs or its own "
                    "JSONL of lists, docs/choir.md)"
                )
            return None
    return detect(p, "inspect")


def _temperature(src: LogSource, path: str, s: ChoirStudyConfig) -> float:
    recorded = sorted({float(t) for t in src.facts.get("temperature") or [] if t is not None})
    if len(recorded) == 1:
        return recorded[0]
    if len(recorded) > 1:
        raise InputError(
            f"{path}: the log's model calls ran at several temperatures ({recorded}); a list's "
            "temperature is part of its cell, so split the log by temperature"
        )
    if s.import_temperature is None:
        raise InputError(
            f"{path}: the log records no temperature (the provider's default was used); give it with "
            "study.import_temperature=<T>"
        )
    return float(s.import_temperature)


def _list_rows(seq: LogSequence, temperature: float, s: ChoirStudyConfig) -> list[dict[str, Any]]:
    rows = []
    for d in seq.draws:
        if d.excluded is not None:
            continue
        rows.append(
            {
                "kind": "list",
                "model": seq.family,
                "question": seq.probe,
                "condition": seq.condition,
                "template": seq.condition,
                "persona": NO_PERSONA,
                "temperature": temperature,
                "generation": d.position - 1,
                "raw": d.text,
                "items": [i.to_json() for i in extract_items(d.text, s.items_per_list).items],
                "source": seq.source,
            }
        )
    return rows


def foreign_lists(
    found: Found, s: ChoirStudyConfig
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    """The list rows and the ``log_audit`` rows of the log(s), and each question's text; the
    whole input is read and checked before anything is returned."""
    rows: list[dict[str, Any]] = []
    audits: list[dict[str, Any]] = []
    texts: dict[str, str] = {}
    seen: dict[tuple[Any, ...], str] = {}
    for src, seqs in read_logs(found):
        t = _temperature(src, str(found.path / src.files[0]) if found.path.is_dir() else str(found.path), s)
        lists = []
        for seq in seqs:
            if not seq.prompt:
                raise InputError(f"{src.files[0]}: sample {seq.probe!r} has no input text to ask")
            if texts.setdefault(seq.probe, seq.prompt) != seq.prompt:
                raise InputError(f"{src.files[0]}: question {seq.probe!r} has two input texts across logs")
            for r in _list_rows(seq, t, s):
                key = (r["model"], r["question"], r["template"], r["temperature"], r["generation"])
                if key in seen:
                    raise InputError(
                        f"{src.files[0]}: a second list for model {key[0]}, question {key[1]}, temperature "
                        f"{key[3]:g}, epoch {key[4] + 1} (also in {seen[key]}): import one run per model"
                    )
                seen[key] = src.files[0]
                lists.append(r)
        counts = {  # named as the draws study's, so one report section reads both
            "sequences": len({r["question"] for r in lists}),
            "draws": len(lists),
            "draws_read": sum(len(q.draws) for q in seqs),
            "empty_lists": sum(1 for r in lists if not r["items"]),
        }
        audits.append(audit_row(src, counts, temperature=t))
        rows += lists
    if not rows:
        raise InputError(f"{found.path}: no lists (every epoch was left out as a copy or an error)")
    return rows, audits, texts
