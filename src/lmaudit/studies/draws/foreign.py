"""Draws from other tools' logs (inspect_ai, lm-eval; docs/interop.md): the logs as measurement
rows (the ``log_audit`` rows and section: :mod:`lmaudit.interop.audit`).

``measure`` turns a log into rows: one ``sequence`` row per sample (inspect) or doc (lm-eval),
its answers normalised by ``study.normalise`` (the raw completions kept beside them, draws that
are not independent left out and listed in ``meta.excluded``), and one ``log_audit`` row per
log file with what the log gets wrong and, where the log scored its samples, the scores (for
the error bars, :mod:`lmaudit.interop.scores`). ``analyze`` reads both kinds back; both
sections are pure functions of the ``log_audit`` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lmaudit.interop.audit import audit_row, read_logs
from lmaudit.interop.records import Found, LogSequence

__all__ = ["foreign_rows"]


def _sequence_row(seq: LogSequence, norm: Callable[[str], str]) -> dict[str, Any] | None:
    kept = [d for d in seq.draws if d.excluded is None]
    if not kept:
        return None
    excluded = [{"position": d.position, "why": d.excluded, "raw": d.text} for d in seq.draws if d.excluded]
    meta = {
        **seq.meta,
        "positions": [d.position for d in kept],
        **({"excluded": excluded} if excluded else {}),
    }
    return {
        "kind": "sequence",
        "family": seq.family,
        "source": seq.source,
        "condition": seq.condition,
        "probe": seq.probe,
        "draws": [norm(d.text) for d in kept],
        "raw": [d.text for d in kept],
        "meta": meta,
    }


def foreign_rows(found: Found, norm: Callable[[str], str], rule: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every row of a log (or folder of logs): per file, its ``log_audit`` row, then its sequences.
    The whole input is read and checked before a row is returned."""
    rows: list[dict[str, Any]] = []
    for src, seqs in read_logs(found):
        seq_rows = [_sequence_row(s, norm) for s in seqs]
        kept = [r for r in seq_rows if r is not None]
        counts = {
            "sequences_read": len(seqs),
            "sequences": len(kept),
            "sequences_emptied": len(seqs) - len(kept),
            "draws_read": sum(len(s.draws) for s in seqs),
            "draws": sum(len(r["draws"]) for r in kept),
        }
        scores = {"scores": src.scores} if src.scores is not None else {}
        rows.append(audit_row(src, counts, normalise=dict(rule), **scores))
        rows += kept
    return rows
