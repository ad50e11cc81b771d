"""Ranking ballots: the evaluators' prompt, the rule that reads a ranking out of their answer, and
ballots recorded elsewhere (JSONL).

The prompt shows the question and the candidates, source hidden, each under a letter (``A``,
``B``, ...) in a shuffled order, and asks for the letters best first, separated by ``>``.
:func:`parse_ranking` reads, in this order of preference:

1. a *chain*: one line whose content is letters joined by ``>``, ``,``, ``;``, ``→`` or ``-``
   (``C > A > B``, ``Ranking: C, A, B``, ``c > a > b``); two different chains are refused;
2. a *numbered list*: the first block of lines starting ``1.``, ``1)``, ``#1``, ``-`` or ``•``
   whose first token is a letter (``C``, ``Candidate C``, ``(C)``, ``[C]``), alone or followed by
   ``.``, ``:``, ``)``, ``-`` or ``,`` and the text, taken in the order written (a line that
   starts with a word such as "A good answer" is not read as a letter).

Markdown emphasis and back-ticks are ignored. A ranking must name only shown letters, each at
most once; one omitted letter is placed last (``completed``); more omissions, an unknown or a
repeated letter make the ballot invalid: it is kept with its raw text and the rule it broke,
and counted, never used.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.provenance.io import check_fields
from lmaudit.studies.choir.importer import records
from lmaudit.studies.choir.pools import POOLS, source_of

__all__ = [
    "COHORTS",
    "DEFAULT_PROMPT",
    "FINALIST_PROMPT",
    "Parsed",
    "check_ranking",
    "labels_for",
    "parse_ranking",
    "read_ballots",
    "render_prompt",
    "render_sets_prompt",
]

COHORTS = ("conditioned", "unconditioned")
DEFAULT_PROMPT = (
    "Question: {QUESTION}\n\n"
    "Here are {N} candidate answers to this question, in random order:\n\n"
    "{CANDIDATES}\n\n"
    "Rank all {N} candidates from best to worst: the most insightful, distinctive and useful "
    "answer to the question first. Reply with the letters only, best first, separated by "
    '" > " (for example: {EXAMPLE}). Do not explain.'
)
FINALIST_PROMPT = (
    "Question: {QUESTION}\n\n"
    "Here are {N} sets of candidate answers to this question, in random order:\n\n"
    "{SETS}\n\n"
    "Rank all {N} sets from best to worst: the set whose answers, taken together, are the most "
    "insightful, distinctive and useful first. Reply with the set letters only, best first, "
    'separated by " > " (for example: {EXAMPLE}). Do not explain.'
)
_SEP = r"\s*(?:>|,|;|→|->|-)\s*"
_CHAIN = re.compile(rf"^(?:[A-Za-z ]{{0,30}}:\s*)?([A-Za-z](?:{_SEP}[A-Za-z])+)\s*\.?$")
_ITEM = re.compile(
    r"^\s*(?:#?\d+\s*[.):]?|[-•])\s*(?:candidate\s+|option\s+)?"
    r"(?:[(\[]([A-Za-z])[)\]]|([A-Za-z])(?=$|\s*[.:)\-–,]))",
    re.IGNORECASE,
)


def labels_for(n: int) -> list[str]:
    if not 1 <= n <= 26:
        raise InputError(f"ranking: {n} candidates cannot be lettered A-Z (at most 26)")
    return [chr(ord("A") + i) for i in range(n)]


def _example(labels: list[str]) -> str:
    return " > ".join(labels[::-1][: min(3, len(labels))]) + (" > ..." if len(labels) > 3 else "")


def _fill(template: str, question: str, shown: tuple[str, str], labels: list[str]) -> str:
    """``template`` with its placeholders filled, in this order: ``{QUESTION}``, the shown
    options' placeholder (``shown``: placeholder, text), ``{N}`` (the number of letters) and
    ``{EXAMPLE}`` (an example ranking of the letters)."""
    placeholder, text = shown
    return (
        template.replace("{QUESTION}", question)
        .replace(placeholder, text)
        .replace("{N}", str(len(labels)))
        .replace("{EXAMPLE}", _example(labels))
    )


def render_prompt(template: str | None, question: str, texts: list[str]) -> str:
    labels = labels_for(len(texts))
    lines = "\n".join(f"{lab}. {t}" for lab, t in zip(labels, texts, strict=True))
    return _fill(template or DEFAULT_PROMPT, question, ("{CANDIDATES}", lines), labels)


def render_sets_prompt(template: str | None, question: str, sets: list[list[str]]) -> str:
    """The finalist stage's prompt: each set's texts under ``Set A:``, ``Set B:``, ... (sources hidden)."""
    labels = labels_for(len(sets))
    blocks = "\n\n".join(
        f"Set {lab}:\n" + "\n".join(f"- {t}" for t in texts) for lab, texts in zip(labels, sets, strict=True)
    )
    return _fill(template or FINALIST_PROMPT, question, ("{SETS}", blocks), labels)


@dataclass(frozen=True)
class Parsed:
    valid: bool
    ranking: list[str] = field(default_factory=list)  # letters, best first (valid ballots)
    completed: bool = False  # one omitted letter was placed last
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_ranking(found: list[str], labels: list[str]) -> Parsed:
    unknown = [x for x in found if x not in labels]
    if unknown:
        return Parsed(False, error=f"letter {unknown[0]} is not a shown candidate")
    dup = [x for i, x in enumerate(found) if x in found[:i]]
    if dup:
        return Parsed(False, error=f"letter {dup[0]} is ranked twice")
    missing = [x for x in labels if x not in found]
    if len(missing) > 1:
        return Parsed(False, error=f"ranks {len(found)} of {len(labels)} candidates")
    return Parsed(True, found + missing, completed=bool(missing))


def parse_ranking(raw: Any, labels: list[str], noun: str | None = None) -> Parsed:
    """The ranking (letters best first) in an evaluator's answer, or an invalid ballot saying why.

    ``noun`` (the finalist stage: ``set``): a letter may be written after it (``Set B > Set A``)."""
    if not isinstance(raw, str):
        return Parsed(False, error="not text")
    text = re.sub(r"[*_`]", "", raw.replace("\r\n", "\n"))
    if noun:
        text = re.sub(rf"\b{re.escape(noun)}\s+(?=[A-Za-z]\b)", "", text, flags=re.IGNORECASE)
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    if not lines:
        return Parsed(False, error="empty output")
    chains = []
    for ln in lines:
        m = _CHAIN.match(ln)
        if m:
            chains.append([x.upper() for x in re.findall(r"[A-Za-z]", m.group(1))])
    if chains:
        if any(c != chains[0] for c in chains[1:]):
            return Parsed(False, error="two different rankings")
        return check_ranking(chains[0], labels)
    items = []
    for ln in lines:
        m = _ITEM.match(ln)
        if m:
            items.append((m.group(1) or m.group(2)).upper())
        elif items:
            break  # the first block of list lines is the ranking
    if items:
        return check_ranking(items, labels)
    return Parsed(False, error="no ranking found (neither 'C > A > B' nor a numbered list of letters)")


# --- ballots recorded elsewhere --------------------------------------------------------------

_REQUIRED = ("question", "cohort", "evaluator", "candidates")
_OPTIONAL = ("stage", "persona", "replicate", "raw", "ranking", "question_text")


def _pool_and_source(c: dict[str, Any], w: str) -> tuple[str, str]:
    pool, source = c.get("pool"), c.get("source")
    if pool is not None and pool not in POOLS:
        raise InputError(f"{w}: field 'pool' = {pool!r} is not one of {list(POOLS)}")
    if source is not None and source not in COHORTS:
        raise InputError(f"{w}: field 'source' = {source!r} is not conditioned or unconditioned")
    derived = None if pool is None else source_of(pool)
    if pool is None and source is None:
        raise InputError(f"{w}: needs 'pool' or 'source'")
    if source is not None and derived is not None and source != derived:
        raise InputError(f"{w}: field 'source' = {source!r} contradicts pool {pool!r}")
    return pool or f"{source}_unspecified", str(source or derived)


def _set(c: Any, where: str, k: int) -> dict[str, Any]:
    """A finalist-stage candidate: one pool's finalists under one label."""
    w = f"{where}: field 'candidates[{k}]'"
    if not isinstance(c, dict):
        raise InputError(f"{w} must be an object with label, finalists and pool or source")
    check_fields(c, w, optional=("label", "pool", "source", "finalists"))
    if not isinstance(c.get("label"), str) or not c["label"].strip():
        raise InputError(f"{w}: field 'label' must be a non-empty string")
    pool, source = _pool_and_source(c, w)
    fin = c.get("finalists")
    if not isinstance(fin, list) or not fin:
        raise InputError(f"{w}: field 'finalists' must be a non-empty list (texts or objects with text)")
    out = []
    for j, f in enumerate(fin):
        f = {"text": f} if isinstance(f, str) else f
        if not isinstance(f, dict) or set(f) - {"text", "id", "family"}:
            raise InputError(f"{w}: field 'finalists[{j}]' must be a text or an object with text, id, family")
        if not isinstance(f.get("text"), str) or not f["text"].strip():
            raise InputError(f"{w}: field 'finalists[{j}].text' must be a non-empty string")
        text = f["text"].strip()
        out.append({"id": str(f.get("id") or text), "text": text, "family": str(f.get("family") or text)})
    return {"label": c["label"], "id": pool, "pool": pool, "source": source, "finalists": out}


def _candidate(c: Any, where: str, k: int) -> dict[str, Any]:
    w = f"{where}: field 'candidates[{k}]'"
    if not isinstance(c, dict):
        raise InputError(f"{w} must be an object with label, text and pool or source")
    check_fields(c, w, optional=("label", "text", "pool", "source", "family", "id"))
    for key in ("label", "text"):
        if not isinstance(c.get(key), str) or not c[key].strip():
            raise InputError(f"{w}: field {key!r} must be a non-empty string")
    pool, source = _pool_and_source(c, w)
    text = c["text"].strip()
    return {
        "label": c["label"],
        "id": str(c.get("id") or text),
        "text": text,
        "pool": pool,
        "source": source,
        "family": str(c.get("family") or text),
    }


def read_ballots(path: str | Path) -> list[dict[str, Any]]:
    """``ballot`` measurement records from a JSONL file (docs/choir.md); errors name line and field."""
    rows: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for line, where, obj in records(path, _REQUIRED, _OPTIONAL):
        for key in ("question", "evaluator"):
            if not isinstance(obj[key], str) or not obj[key]:
                raise InputError(f"{where}: field {key!r} must be a non-empty string")
        if obj["cohort"] not in COHORTS:
            raise InputError(
                f"{where}: field 'cohort' = {obj['cohort']!r} is not conditioned or unconditioned"
            )
        rep = obj.get("replicate", 0)
        if isinstance(rep, bool) or not isinstance(rep, int) or rep < 0:
            raise InputError(f"{where}: field 'replicate' must be an integer >= 0, got {rep!r}")
        stage = obj.get("stage", 1)
        if stage not in (1, 2) or isinstance(stage, bool):
            raise InputError(
                f"{where}: field 'stage' must be 1 (candidates) or 2 (finalist sets), got {stage!r}"
            )
        cands = obj["candidates"]
        if not isinstance(cands, list) or not cands:
            raise InputError(f"{where}: field 'candidates' must be a non-empty list")
        read = _candidate if stage == 1 else _set
        shown = [read(c, where, k) for k, c in enumerate(cands)]
        labels = [c["label"] for c in shown]
        if len(set(labels)) != len(labels):
            raise InputError(f"{where}: field 'candidates': labels must be distinct, got {labels}")
        if stage == 2 and len({c["pool"] for c in shown}) != len(shown):
            raise InputError(f"{where}: field 'candidates': a pool may be shown as one set only")
        if ("raw" in obj) == ("ranking" in obj):
            raise InputError(
                f"{where}: give exactly one of 'raw' (the answer) or 'ranking' (labels, best first)"
            )
        if "ranking" in obj and not (
            isinstance(obj["ranking"], list) and all(isinstance(x, str) for x in obj["ranking"])
        ):
            raise InputError(f"{where}: field 'ranking' must be a list of candidate labels")
        if "raw" in obj and not isinstance(obj["raw"], str):
            raise InputError(f"{where}: field 'raw' must be a string")
        persona = str(obj.get("persona") or ("none" if obj["cohort"] == "unconditioned" else "unnamed"))
        seen_key = (obj["question"], stage, obj["cohort"], obj["evaluator"], persona, rep)
        if seen_key in seen:
            raise InputError(
                f"{where}: a second stage-{stage} ballot of evaluator {obj['evaluator']} ({obj['cohort']}, "
                f"persona {persona}, replicate {rep}) on question {obj['question']}"
            )
        seen.add(seen_key)
        rows.append(
            {
                "kind": "ballot",
                "stage": stage,
                "question": obj["question"],
                "cohort": obj["cohort"],
                "evaluator": obj["evaluator"],
                "persona": persona,
                "replicate": rep,
                "candidates": shown,
                "raw": obj.get("raw"),
                "ranking": obj.get("ranking"),
                "line": line,
            }
        )
    if not rows:
        raise InputError(f"{path}: no ballots")
    return rows
