"""AlpacaEval annotations (``annotations.json``) as judge-study measurement rows, where each
annotation records the order its two outputs were shown in (docs/interop.md, "Judge", "AlpacaEval").

An annotation holds ``instruction``, ``output_1``, ``output_2``, ``generator_1``,
``generator_2``, ``annotator`` and ``preference`` (1: output_1 preferred, 2: output_2,
1.5 a tie, null when no preference was parsed; weighted annotators give a number in [1, 2]).
alpaca_eval shows the outputs in a random order (``is_randomize_output_order``: its
``RandomSwitchTwoColumnsProcessor`` sets ``is_switched_outputs``, seeded by the instruction),
then switches them back, maps the preference back to ``output_1``/``output_2`` and drops
``is_switched_outputs`` before the annotation is stored. So a stock annotation does not record
which output the judge saw first, and such a file is refused: position cannot be audited from
it. An annotation that carries ``is_switched_outputs`` (true: ``output_2`` was shown first)
records it, and is read here.

The two outputs of a pair are oriented by (generator, output) in sorted order: A is the first,
B the second. An annotation that showed A first is condition ``P0``, one that showed B first is
``SWAP``; a pair judged in both orders has both. A stock alpaca_eval run judges each pair once,
in its random order: with that order kept, the file is read too (the randomization test of
position bias, ``order_swap.randomized``). Preferences are read as alpaca_eval's discrete
win rate reads them: below 1.5 output_1 wins, above it output_2, 1.5 (or the older 0) a tie.
Outputs that are identical are never shown to the judge (alpaca_eval sets 1.5 itself): they are
left out and counted.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.interop.records import judge_design_head
from lmaudit.provenance.digest import sha256_text
from lmaudit.provenance.io import iter_jsonl, read_json, read_utf8

__all__ = ["ORDER_FIELD", "looks_like", "read_annotations", "read_rows", "rows_of"]

REQUIRED = ("instruction", "output_1", "output_2", "generator_1", "generator_2", "annotator", "preference")
ORDER_FIELD = "is_switched_outputs"
# the judge's text, as shown (it names the outputs in the order the judge saw them)
RAW = ("preference_raw_completion", "raw_completion")
NOT_RECORDED = (
    "the order the outputs were shown in is not recorded: alpaca_eval drops its "
    f"'{ORDER_FIELD}' column after annotating, so position bias cannot be audited from this file. "
    f"Keep '{ORDER_FIELD}' (true: output_2 was shown first) in each annotation, or annotate with "
    f"is_randomize_output_order=False and add '{ORDER_FIELD}': false"
)


def looks_like(obj: dict[str, Any]) -> bool:
    return "preference" in obj or ("output_1" in obj and "output_2" in obj)


def _element_lines(text: str) -> list[int]:
    """The line each element of a (valid) top-level JSON array starts on."""
    dec = json.JSONDecoder()
    out: list[int] = []
    i, line, last = text.index("[") + 1, 1, 0
    while True:
        while text[i] in " \t\r\n,":
            i += 1
        if text[i] == "]":
            return out
        line += text.count("\n", last, i)
        last = i
        out.append(line)
        _, i = dec.raw_decode(text, i)


def _records(path: Path) -> list[tuple[int, Any]]:
    text = read_utf8(path)
    if text.lstrip().startswith("["):
        doc = read_json(path)
        return list(zip(_element_lines(text), doc, strict=True))
    return list(iter_jsonl(path))


def _string(obj: dict[str, Any], field: str, where: str) -> str:
    v = obj[field]
    if not isinstance(v, str):
        raise InputError(f"{where}: field {field!r} must be a string, got {type(v).__name__}")
    return v


def read_annotations(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line, annotation)`` for every annotation, validated (InputError naming file, line and
    field); refused as a whole when no annotation records the shown order."""
    p = Path(path)
    recs = _records(p)
    if not recs:
        raise InputError(f"{p}: no annotations")
    out = []
    for line, obj in recs:
        where = f"{p}: line {line}"
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object (an annotation), got {type(obj).__name__}")
        missing = [f for f in REQUIRED if f not in obj]
        if missing:
            raise InputError(
                f"{where}: missing field(s) {missing} (an AlpacaEval annotation has {list(REQUIRED)})"
            )
        for f in REQUIRED[:-1]:
            _string(obj, f, where)
        pref = obj["preference"]
        if pref is not None and (isinstance(pref, bool) or not isinstance(pref, int | float)):
            raise InputError(f"{where}: field 'preference' must be a number or null, got {pref!r}")
        out.append((line, obj))
    lacking = [line for line, obj in out if ORDER_FIELD not in obj]
    if len(lacking) == len(out):
        raise InputError(f"{p}: {NOT_RECORDED}")
    if lacking:
        raise InputError(f"{p}: line {lacking[0]}: missing field {ORDER_FIELD!r}; {NOT_RECORDED}")
    for line, obj in out:
        if not isinstance(obj[ORDER_FIELD], bool):
            raise InputError(
                f"{p}: line {line}: field {ORDER_FIELD!r} must be true or false, got {obj[ORDER_FIELD]!r}"
            )
    return out


def _winner(pref: Any) -> tuple[int | str | None, str | None]:
    """1 or 2 (the output preferred), 'TIE', or None with the reason it is invalid."""
    if pref is None or (isinstance(pref, float) and math.isnan(pref)):
        return None, "preference null: no preference was parsed from the annotator's completion"
    if pref in (0, 1.5):
        return "TIE", None
    if not 1 <= pref <= 2:
        return None, f"preference {pref!r} is not in [1, 2]"
    return (1 if pref < 1.5 else 2), None


def rows_of(annotations: list[tuple[int, dict[str, Any]]]) -> tuple[list[dict[str, Any]], int]:
    """One judgment row per annotation (identical outputs left out); their count is returned."""
    rows: list[dict[str, Any]] = []
    seen: Counter[tuple[str, str]] = Counter()
    identical = 0
    for line, a in annotations:
        sides = [(a["generator_1"], a["output_1"]), (a["generator_2"], a["output_2"])]
        if a["output_1"] == a["output_2"]:
            identical += 1
            continue
        first_side, second_side = sorted(sides)
        shown_first = sides[1] if a[ORDER_FIELD] else sides[0]
        cond = "P0" if shown_first == first_side else "SWAP"
        digest = sha256_text(json.dumps([a["instruction"], first_side[1], second_side[1]]))[:12]
        item = f"{a['annotator']}|{first_side[0]}|{second_side[0]}|{digest}"
        rep = seen[(item, cond)]
        seen[(item, cond)] += 1
        won, error = _winner(a["preference"])
        original = won if won in (None, "TIE") else ("A" if sides[int(won) - 1] == first_side else "B")
        shown = original if cond == "P0" or original in (None, "TIE") else ("B" if original == "A" else "A")
        raw = next((a[k] for k in RAW if isinstance(a.get(k), str)), None)
        rows.append(
            {
                "kind": "judgment",
                "source": "import",
                "format": "alpaca_eval",
                "condition": cond,
                "item": item,
                "replicate": rep,
                "attempt": 0,
                "final": True,
                "seed": None,
                "swap": cond == "SWAP",
                "wrap": [],
                "isolation": "unknown",
                "raw": raw,
                "recorded": {"line": line, "preference": a["preference"], ORDER_FIELD: a[ORDER_FIELD]},
                "valid": error is None,
                "error": error,
                "winner": shown,
                "winner_original": original,
                "confidence": None,
                "reason": None,
                "pair": {
                    "judge_prompt": a["annotator"],
                    "models": {"A": first_side[0], "B": second_side[0]},
                    "turn": None,
                    "question_id": None,
                    "lengths": {
                        k: {"chars": len(text), "words": len(text.split())}
                        for k, (_, text) in (("A", first_side), ("B", second_side))
                    },
                },
            }
        )
    return rows, identical


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """A design row, then one judgment row per annotation. Pairs judged in both orders are
    compared order against order; pairs judged once, in the recorded random order, are read by
    the randomization test (``order_swap.randomized``)."""
    p = Path(path)
    annotations = read_annotations(p)
    rows, identical = rows_of(annotations)
    orders: dict[str, set[str]] = {}
    for r in rows:
        orders.setdefault(r["item"], set()).add(r["condition"])
    if not rows:
        raise InputError(f"{p}: every annotation compares identical outputs: no pair was shown to the judge")
    annotators = sorted({a["annotator"] for _, a in annotations})
    note = "alpaca_eval annotators may judge several pairs in one prompt (batch_size); annotations do not record it"
    design = {
        **judge_design_head("alpaca_eval", p, annotators, "unknown", note),
        "orders": {"P0": "output A (sorted first) shown first", "SWAP": "output B shown first"},
        "annotations": len(annotations),
        "identical_outputs_left_out": identical,
        "pairs_in_both_orders": sum(len(v) == 2 for v in orders.values()),
        "pairs_in_one_order": sum(len(v) == 1 for v in orders.values()),
    }
    return [design, *rows]
