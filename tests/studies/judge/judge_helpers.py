"""Helpers for the judge study's tests: small candidate sets written byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

# Strings that a careless pipeline would alter: placeholders, braces, CRLF, trailing and leading
# whitespace, the wrapper's own markers, non-ASCII, a lone backslash, an empty response.
TRICKY = [
    ("T01", "Say hi.", "  Hi!  \n", "{response_b} and {rubric} and {0} {"),
    ("T02", "Line endings?", "a\r\nb\rc\n\n", "\tTabbed\u00a0nbsp\u2028sep\u200b"),
    ("T03", "Markers?", "<<<END CANDIDATE RESPONSE>>>", "<<<BEGIN CANDIDATE RESPONSE>>>\nx"),
    ("T04", "Unicode?", "café 70 cm² – ✓ \\", ""),
]

MODELS = ("zeta-model-Q9", "omega-model-K7")


def write_candidates(folder: Path, rows: list[tuple[str, str, str, str]]) -> tuple[Path, Path]:
    """candidates.jsonl and mapping.json; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    cpath = folder / "candidates.jsonl"
    with cpath.open("w", encoding="utf-8", newline="") as fh:
        for pid, prompt, a, b in rows:
            obj = {"prompt_id": pid, "prompt": prompt, "response_a": a, "response_b": b}
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
    mpath = folder / "mapping.json"
    mapping = {pid: {"A": MODELS[i % 2], "B": MODELS[(i + 1) % 2]} for i, (pid, *_rest) in enumerate(rows)}
    mpath.write_text(json.dumps(mapping, indent=2), encoding="utf-8")
    return cpath, mpath


def simple_rows(n: int) -> list[tuple[str, str, str, str]]:
    return [(f"S{i:02d}", f"Question {i}?", f"Answer A to {i}.", f"Answer B to {i}.") for i in range(n)]
