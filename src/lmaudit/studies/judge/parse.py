"""Strict parsing of the rubric's verdict format; nothing is ever coerced to a label.

The rubric asks for exactly::

    WINNER: A | B | TIE
    CONFIDENCE: <0.00-1.00>
    REASON: <one concise sentence>

A verdict is valid when the output, with surrounding whitespace removed and ``\\r\\n`` read as
a line break, is exactly those three lines in that order: the field names in capitals, one
space after each colon, a winner of ``A``, ``B`` or ``TIE``, a confidence written as a decimal
in [0, 1] (``0``, ``1``, ``0.7``, ``0.85``, ``1.00``) and a non-empty one-line reason. Anything
else (lower case, markdown, a missing field, a second verdict, trailing text, "95%") is
invalid: the raw text is kept with the first rule it broke, and no winner is read from it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LABELS", "Verdict", "parse_verdict"]

LABELS = ("A", "B", "TIE")
_WINNER = re.compile(r"WINNER: (A|B|TIE)")
_CONF = re.compile(r"CONFIDENCE: (0(?:\.[0-9]+)?|1(?:\.0+)?)")
_REASON = re.compile(r"REASON: (\S.*)")


@dataclass(frozen=True)
class Verdict:
    """A parsed judge output: ``valid`` with winner, confidence and reason, or ``error``."""

    raw: str
    valid: bool
    winner: str | None = None
    confidence: float | None = None
    reason: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _invalid(raw: str, error: str) -> Verdict:
    return Verdict(raw=raw, valid=False, error=error)


def parse_verdict(raw: str) -> Verdict:
    """The verdict in ``raw``, or an invalid one naming the first rule it broke."""
    if not isinstance(raw, str):
        return _invalid(str(raw), "not text")
    lines = raw.replace("\r\n", "\n").strip().split("\n")
    if not lines or lines == [""]:
        return _invalid(raw, "empty output")
    if len(lines) < 3:
        return _invalid(raw, f"expected 3 lines (WINNER, CONFIDENCE, REASON), got {len(lines)}")
    w = _WINNER.fullmatch(lines[0])
    if w is None:
        return _invalid(raw, "line 1 is not 'WINNER: A', 'WINNER: B' or 'WINNER: TIE'")
    c = _CONF.fullmatch(lines[1])
    if c is None:
        return _invalid(raw, "line 2 is not 'CONFIDENCE: <decimal in [0, 1]>'")
    r = _REASON.fullmatch(lines[2])
    if r is None or not r.group(1).strip():
        return _invalid(raw, "line 3 is not 'REASON: <text>'")
    if len(lines) > 3:
        return _invalid(raw, f"text after the REASON line ({len(lines) - 3} more line(s))")
    return Verdict(
        raw=raw, valid=True, winner=w.group(1), confidence=float(c.group(1)), reason=r.group(1).rstrip()
    )
