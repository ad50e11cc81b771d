"""FastChat MT-bench pairwise judgments (``data/<bench>/model_judgment/<judge>_pair.jsonl``) as
judge-study measurement rows (docs/interop.md, "Judge", "FastChat").

FastChat's ``gen_judgment.py`` (``common.play_a_match_pair``) judges each (question, model_1,
model_2, turn) twice with one judge prompt: ``g1`` shows model_1's answer as "Assistant A",
``g2`` shows model_2's answer first. It maps each verdict back to ``model_1``, ``model_2``,
``tie`` or ``error`` (no ``[[A]]``/``[[B]]``/``[[C]]`` found) and writes one JSON line::

    {"question_id": 81, "model_1": "gpt-4", "model_2": "llama-13b", "g1_winner": "model_1",
     "g2_winner": "tie", "judge": ["gpt-4", "pair-v2"], "g1_user_prompt": "...",
     "g1_judgment": "...", "g2_user_prompt": "...", "g2_judgment": "...", "turn": 1, "tstamp": ...}

Each line becomes two rows: condition ``P0`` (g1, model_1 shown first) and ``SWAP`` (g2,
model_2 shown first), labels in the original orientation A = model_1, B = model_2. A line
judged in one order only (a single-order file: ``g1_winner`` or ``g2_winner`` alone, the order
drawn at random when the file was made) becomes the one row of that order.
FastChat's own reader (``common.load_pairwise_model_judgments``) collapses g1 and g2 into one
winner (``inconsistent`` when they differ) and keys games without the turn, so the lines are
read here. A line repeating an earlier (judge, prompt, question, models, turn) is a further
replicate (FastChat appends to the file when judging is run again).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.interop.records import judge_design_head
from lmaudit.provenance.io import iter_jsonl

__all__ = [
    "Answers",
    "PairJudgment",
    "answer_files",
    "lengths",
    "looks_like",
    "read_answers",
    "read_pairs",
    "read_rows",
    "rows_of",
]

Answers = dict[tuple[str, str], list[str]]  # (model_id, question_id) -> the answer's turns

REQUIRED = ("question_id", "model_1", "model_2", "judge", "turn")
ORDERS = ("g1_winner", "g2_winner")  # at least one: g1 shows model_1 first, g2 model_2
WINNERS = ("model_1", "model_2", "tie", "error")
# the displayed label of each recorded winner: g1 shows model_1 as A, g2 shows model_2 as A
_SHOWN = {
    "P0": {"model_1": "A", "model_2": "B", "tie": "TIE"},
    "SWAP": {"model_2": "A", "model_1": "B", "tie": "TIE"},
}
_ORIGINAL = {"model_1": "A", "model_2": "B", "tie": "TIE"}


@dataclass(frozen=True)
class PairJudgment:
    """One line of a FastChat pair file: one (question, models, turn) judged in both orders."""

    line: int
    question_id: int | str
    model_1: str
    model_2: str
    judge: str
    prompt: str
    turn: int
    g1_winner: Any
    g2_winner: Any
    g1_judgment: str | None
    g2_judgment: str | None
    orders: tuple[str, ...] = ("P0", "SWAP")  # the orders judged: P0 (g1), SWAP (g2)
    g1_user_prompt: str | None = None
    g2_user_prompt: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str, str, int]:
        return (self.judge, self.prompt, str(self.question_id), self.model_1, self.model_2, self.turn)

    @property
    def item(self) -> str:
        return f"q{self.question_id}|t{self.turn}|{self.model_1}|{self.model_2}|{self.judge}/{self.prompt}"


def looks_like(obj: dict[str, Any]) -> bool:
    """Whether a first line is a FastChat judgment line (pairwise, single or one-winner)."""
    return any(f in obj for f in ORDERS) or ("question_id" in obj and ("winner" in obj or "score" in obj))


def _string(obj: dict[str, Any], field: str, where: str) -> str:
    v = obj[field]
    if not isinstance(v, str) or not v:
        raise InputError(f"{where}: field {field!r} must be a non-empty string, got {v!r}")
    return v


def _line(obj: dict[str, Any], lineno: int, path: Path) -> PairJudgment:
    where = f"{path}: line {lineno}"
    if "m1_score" in obj or "m2_score" in obj or ("score" in obj and "g1_winner" not in obj):
        raise InputError(
            f"{where}: a single-answer grading record (scores, no presentation order); only "
            "pairwise judgments (g1_winner, g2_winner) can be audited for position"
        )
    if "winner" in obj and "g1_winner" not in obj:
        raise InputError(
            f"{where}: one field 'winner' and no g1_winner/g2_winner: the order each answer was "
            "shown in is not recorded, so position bias cannot be audited from this file"
        )
    missing = [f for f in REQUIRED if f not in obj]
    if not any(f in obj for f in ORDERS):
        missing += ["g1_winner or g2_winner"]
    if missing:
        raise InputError(
            f"{where}: missing field(s) {missing} (a FastChat pairwise judgment has {list(REQUIRED)} "
            "and g1_winner, g2_winner or both)"
        )
    qid = obj["question_id"]
    if isinstance(qid, bool) or not isinstance(qid, int | str) or qid == "":
        raise InputError(
            f"{where}: field 'question_id' must be an integer or a non-empty string, got {qid!r}"
        )
    judge = obj["judge"]
    if not (isinstance(judge, list) and len(judge) == 2 and all(isinstance(x, str) and x for x in judge)):
        raise InputError(f"{where}: field 'judge' must be [judge model, prompt name], got {judge!r}")
    turn = obj["turn"]
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise InputError(f"{where}: field 'turn' must be an integer >= 1, got {turn!r}")
    texts = {}
    for f in ("g1_judgment", "g2_judgment", "g1_user_prompt", "g2_user_prompt"):
        v = obj.get(f)
        if v is not None and not isinstance(v, str):
            raise InputError(f"{where}: field {f!r} must be a string, got {type(v).__name__}")
        texts[f] = v
    return PairJudgment(
        line=lineno,
        question_id=qid,
        model_1=_string(obj, "model_1", where),
        model_2=_string(obj, "model_2", where),
        judge=judge[0],
        prompt=judge[1],
        turn=turn,
        g1_winner=obj.get("g1_winner"),
        g2_winner=obj.get("g2_winner"),
        g1_judgment=texts["g1_judgment"],
        g2_judgment=texts["g2_judgment"],
        orders=tuple(c for c, f in zip(("P0", "SWAP"), ORDERS, strict=True) if f in obj),
        g1_user_prompt=texts["g1_user_prompt"],
        g2_user_prompt=texts["g2_user_prompt"],
    )


def read_pairs(path: str | Path) -> list[PairJudgment]:
    """Every line of a FastChat pair file, validated (InputError naming file, line and field)."""
    p = Path(path)
    out = [_line(obj, lineno, p) for lineno, obj in iter_jsonl(p)]
    if not out:
        raise InputError(f"{p}: no judgment lines")
    return out


def _answers(prompt: str | None) -> dict[str, str] | None:
    """The two answers as FastChat's pairwise judge prompts show them (``[The Start of Assistant
    A's Answer]`` ... in pair-v2 and pair-math-v1; every ``### Assistant A:`` turn of the
    conversation in the multi-turn prompts, joined), keyed by displayed label; ``None`` when the
    prompt is not in one of those layouts."""
    if prompt is None:
        return None
    out = {}
    for lab in ("A", "B"):
        one = re.findall(
            rf"\[The Start of Assistant {lab}'s Answer\]\n(.*?)\n\[The End of Assistant {lab}'s Answer\]",
            prompt,
            re.S,
        )
        turns = re.findall(
            rf"### Assistant {lab}:\n(.*?)\n\n(?=### User:|<\|The End of Assistant {lab}'s Conversation)",
            prompt,
            re.S,
        )
        if len(one) == 1:
            out[lab] = one[0]
        elif turns:
            out[lab] = "\n".join(turns)
        else:
            return None
    return out


def lengths(prompt: str | None, swap: bool) -> dict[str, dict[str, int]] | None:
    """Characters and words of each answer in the original orientation (A = model_1), read from
    the judge prompt of one order (``swap``: g2, which shows model_2 as Assistant A)."""
    shown = _answers(prompt)
    if shown is None:
        return None
    original = {"A": shown["B"], "B": shown["A"]} if swap else shown
    return {k: {"chars": len(v), "words": len(v.split())} for k, v in original.items()}


def answer_files(path: str | Path) -> list[Path]:
    """The model_answer files: every ``*.jsonl`` of a folder (sorted), or the one file."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: not found (study.answers_path)")
    files = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    if not files:
        raise InputError(f"{p}: no .jsonl answer files (study.answers_path)")
    return files


def read_answers(path: str | Path) -> Answers:
    """FastChat ``model_answer/<model>.jsonl`` lines (``question_id``, ``model_id``,
    ``choices[0].turns``) from a folder or one file; InputError naming file, line and field."""
    out: Answers = {}
    for f in answer_files(path):
        for lineno, obj in iter_jsonl(f):
            where = f"{f}: line {lineno}"
            missing = [k for k in ("question_id", "model_id", "choices") if k not in obj]
            if missing:
                raise InputError(f"{where}: missing field(s) {missing} (a FastChat model answer)")
            choices = obj["choices"]
            turns = (
                choices[0].get("turns")
                if isinstance(choices, list) and choices and isinstance(choices[0], dict)
                else None
            )
            if not (isinstance(turns, list) and turns and all(isinstance(t, str) for t in turns)):
                raise InputError(f"{where}: field 'choices' must hold [{{'turns': [answer text, ...]}}]")
            model = obj["model_id"]
            if not isinstance(model, str) or not model:
                raise InputError(f"{where}: field 'model_id' must be a non-empty string, got {model!r}")
            out[(model, str(obj["question_id"]))] = turns
    return out


def _answer_lengths(pj: PairJudgment, answers: Answers) -> dict[str, dict[str, int]] | None:
    """Both answers' lengths from model_answer files: the turn's answer for turn 1, the turns up
    to it joined for a later turn (as the multi-turn judge prompts show them)."""
    out = {}
    for lab, model in (("A", pj.model_1), ("B", pj.model_2)):
        turns = answers.get((model, str(pj.question_id)))
        if turns is None or len(turns) < pj.turn:
            return None
        text = "\n".join(turns[: pj.turn]) if pj.turn > 1 else turns[0]
        out[lab] = {"chars": len(text), "words": len(text.split())}
    return out


def _row(pj: PairJudgment, cond: str, replicate: int, answers: Answers | None = None) -> dict[str, Any]:
    field = "g1_winner" if cond == "P0" else "g2_winner"
    recorded = pj.g1_winner if cond == "P0" else pj.g2_winner
    valid = isinstance(recorded, str) and recorded in _ORIGINAL
    size = lengths(pj.g1_user_prompt if cond == "P0" else pj.g2_user_prompt, cond == "SWAP")
    if size is None and answers is not None:
        size = _answer_lengths(pj, answers)
    if valid:
        error = None
    elif recorded == "error":
        error = f"{field} 'error': FastChat found no [[A]], [[B]] or [[C]] verdict in the judgment"
    else:
        error = f"{field} {recorded!r} is not one of {', '.join(WINNERS)}"
    return {
        "kind": "judgment",
        "source": "import",
        "format": "fastchat",
        "condition": cond,
        "item": pj.item,
        "replicate": replicate,
        "attempt": 0,
        "final": True,
        "seed": None,
        "swap": cond == "SWAP",
        "wrap": [],
        "isolation": "fresh",
        "raw": pj.g1_judgment if cond == "P0" else pj.g2_judgment,
        "recorded": {"line": pj.line, field: recorded},
        "valid": valid,
        "error": error,
        "winner": _SHOWN[cond][recorded] if valid else None,
        "winner_original": _ORIGINAL[recorded] if valid else None,
        "confidence": None,
        "reason": None,
        "pair": {
            "judge_prompt": f"{pj.judge}/{pj.prompt}",
            "models": {"A": pj.model_1, "B": pj.model_2},
            "turn": pj.turn,
            "question_id": pj.question_id,
            **({"lengths": size} if size else {}),
        },
    }


def rows_of(pairs: list[PairJudgment], answers: Answers | None = None) -> list[dict[str, Any]]:
    """A judgment row per order a line records (P0: g1, SWAP: g2); a repeated key is the next
    replicate."""
    seen: Counter[tuple[str, str, str, str, str, int]] = Counter()
    rows = []
    for pj in pairs:
        rep = seen[pj.key]
        seen[pj.key] += 1
        rows += [_row(pj, cond, rep, answers) for cond in pj.orders]
    return rows


def read_rows(path: str | Path, answers_path: str | Path | None = None) -> list[dict[str, Any]]:
    """A design row, then two judgment rows per line of the file; answers' lengths from the judge
    prompts, else from the model_answer files at ``answers_path``."""
    p = Path(path)
    pairs = read_pairs(p)
    answers = read_answers(answers_path) if answers_path is not None else None
    judges = sorted({pj.judge for pj in pairs})
    note = "FastChat gen_judgment.py: each verdict one chat completion with the judge prompt alone"
    design: dict[str, Any] = {
        **judge_design_head("fastchat", p, judges, "fresh", note),
        "orders": {"P0": "model_1 shown first (g1_winner)", "SWAP": "model_2 shown first (g2_winner)"},
        "lines": len(pairs),
        "repeated_lines": len(pairs) - len({pj.key for pj in pairs}),
        "lines_in_one_order": sum(len(pj.orders) == 1 for pj in pairs),
    }
    rows = rows_of(pairs, answers)
    if answers_path is not None:
        design["answers_path"] = str(answers_path)
        design["rows_without_lengths"] = sum("lengths" not in r["pair"] for r in rows)
    return [design, *rows]
