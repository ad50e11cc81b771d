"""Free lists recorded elsewhere (JSONL), analysed like elicited ones with no model loaded.

One JSON object per line: ``model``, ``question`` (an id of the configured bank, or any id with
``question_text``), ``template``, ``temperature``, ``persona`` (``none`` for unconditioned
lists), ``generation``, and either ``raw`` (the answer as written: extracted by rule) or
``items`` (already extracted: strings, or objects with ``text`` and optional
``justification``, in rank order). Errors name the file, line and field.

Hand-coded lists: an item object's ``concept`` (a coder's concept id), or a mapping file
(``study.codebook_path``, JSONL ``{question, text, concept}``) for every item. Coded lists are
analysed with those concepts instead of embeddings and clustering; then every item of the file
must have one, and a text has one concept per question.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.provenance.io import check_fields, iter_jsonl
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.data import NO_PERSONA, ChoirMaterials
from lmaudit.studies.choir.extract import extract_items

__all__ = ["read_codebook", "read_import", "records"]

_REQUIRED = ("model", "question", "template", "temperature", "persona", "generation")
_OPTIONAL = ("raw", "items", "question_text")


def _str(obj: dict[str, Any], key: str, where: str) -> str:
    v = obj[key]
    if not isinstance(v, str) or not v:
        raise InputError(f"{where}: field {key!r} must be a non-empty string, got {v!r}")
    return v


def _items(obj: dict[str, Any], where: str, limit: int) -> list[dict[str, Any]]:
    if "raw" in obj and "items" in obj:
        raise InputError(f"{where}: give either 'raw' or 'items', not both")
    if "raw" in obj:
        raw = obj["raw"]
        if not isinstance(raw, str):
            raise InputError(f"{where}: field 'raw' must be a string")
        return [i.to_json() for i in extract_items(raw, limit).items]
    if "items" not in obj:
        raise InputError(f"{where}: missing field 'raw' or 'items'")
    items = obj["items"]
    if not isinstance(items, list):
        raise InputError(f"{where}: field 'items' must be a list")
    out = []
    for k, it in enumerate(items[:limit]):
        text = it.get("text") if isinstance(it, dict) else it
        if not isinstance(text, str) or not text.strip():
            raise InputError(
                f"{where}: field 'items[{k}]' must be a non-empty string or an object with 'text'"
            )
        just = it.get("justification") if isinstance(it, dict) else None
        row = {"rank": k + 1, "text": text.strip(), "justification": just, "extraction_uncertain": False}
        if isinstance(it, dict) and "concept" in it:
            c = it["concept"]
            if not isinstance(c, str | int) or isinstance(c, bool) or not str(c).strip():
                raise InputError(f"{where}: field 'items[{k}].concept' must be a non-empty string or integer")
            row["concept"] = str(c).strip()
        out.append(row)
    return out


def read_codebook(path: str | Path) -> dict[tuple[str, str], str]:
    """A hand-coded codebook: (question, item text) -> concept id."""
    out: dict[tuple[str, str], str] = {}
    for _, where, obj in records(path, ("question", "text", "concept")):
        q, text, c = (obj[k] for k in ("question", "text", "concept"))
        if not all(isinstance(x, str) and x.strip() for x in (q, text)) or not str(c).strip():
            raise InputError(f"{where}: fields 'question', 'text' and 'concept' must be non-empty")
        key = (q, text.strip())
        if out.setdefault(key, str(c).strip()) != str(c).strip():
            raise InputError(f"{where}: item {text!r} of question {q!r} is coded both {out[key]!r} and {c!r}")
    if not out:
        raise InputError(f"{path}: no codes")
    return out


def _code(rows: list[dict[str, Any]], codes: dict[tuple[str, str], str] | None) -> None:
    """Give every item its concept (its own, or the mapping's) and mark the rows coded; refuse
    an uncoded item, a disagreement with the mapping, or a text with two concepts in a question."""
    seen: dict[tuple[str, str], tuple[str, int]] = {}
    for r in rows:
        where = f"line {r['line']}"
        for k, it in enumerate(r["items"]):
            key = (r["question"], it["text"])
            mapped = codes.get(key) if codes is not None else None
            if "concept" not in it and mapped is None:
                raise InputError(f"{where}: item {k} ({it['text']!r}) has no concept (coded import)")
            if mapped is not None and it.setdefault("concept", mapped) != mapped:
                raise InputError(
                    f"{where}: item {k} ({it['text']!r}) is coded {it['concept']!r}, the codebook says {mapped!r}"
                )
            first = seen.setdefault(key, (it["concept"], r["line"]))
            if first[0] != it["concept"]:
                raise InputError(
                    f"{where}: item {it['text']!r} of question {r['question']!r} is coded "
                    f"{it['concept']!r}, but {first[0]!r} on line {first[1]}"
                )
        r["coded"] = True


def records(
    path: str | Path, required: Sequence[str], optional: Sequence[str] = ()
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their line and its name for errors, each checked
    to hold every ``required`` field and no field that is neither required nor ``optional``."""
    for line, obj in iter_jsonl(path):
        where = f"{path}: line {line}"
        if not isinstance(obj, dict):
            raise InputError(f"{where}: not a JSON object")
        check_fields(obj, where, required, optional)
        yield line, where, obj


def read_import(
    path: str | Path, s: ChoirStudyConfig, m: ChoirMaterials, profiles: Iterable[str] = ()
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The list rows of an import file and the text of every question it names."""
    bank = (
        {p.id: p.text for p in m.external} if s.bank == "infinity" else {p.code: p.stem for p in m.targeted}
    )
    personas = {p.id for p in m.personas} | set(profiles)  # ours, and those of study.profiles_path
    rows: list[dict[str, Any]] = []
    texts: dict[str, tuple[str, str]] = {}  # question -> (its text, where that text was given)
    seen: set[tuple[Any, ...]] = set()
    for line, where, obj in records(path, _REQUIRED, _OPTIONAL):
        model, q, template, persona = (
            _str(obj, k, where) for k in ("model", "question", "template", "persona")
        )
        t, g = obj["temperature"], obj["generation"]
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
            raise InputError(f"{where}: field 'temperature' must be a number >= 0, got {t!r}")
        if isinstance(g, bool) or not isinstance(g, int) or g < 0:
            raise InputError(f"{where}: field 'generation' must be an integer >= 0, got {g!r}")
        if persona != NO_PERSONA and persona not in personas:
            raise InputError(
                f"{where}: field 'persona' = {persona!r} is not a persona profile ({sorted(personas)}; give the lists' own in study.profiles_path)"
            )
        if "question_text" in obj:
            text, said = _str(obj, "question_text", where), f"{where}: its 'question_text'"
        elif q in bank:
            text, said = bank[q], f"{where}: the {s.bank} bank's text"
        else:
            raise InputError(
                f"{where}: field 'question' = {q!r} is not in the {s.bank} bank (add 'question_text')"
            )
        if q in texts and texts[q][0] != text:
            raise InputError(
                f"question {q!r} has two texts: {texts[q][1]} is {texts[q][0]!r}, {said} is {text!r}"
            )
        texts.setdefault(q, (text, said))
        key = (model, q, template, persona, float(t), g)
        if key in seen:
            raise InputError(
                f"{where}: a second list for model {model}, question {q}, {template}/{persona}, "
                f"temperature {t}, generation {g}"
            )
        seen.add(key)
        rows.append(
            {
                "kind": "list",
                "model": model,
                "question": q,
                "condition": template if persona == NO_PERSONA else f"{template}|{persona}",
                "template": template,
                "persona": persona,
                "temperature": float(t),
                "generation": g,
                "raw": obj.get("raw"),
                "items": _items(obj, where, s.items_per_list),
                "line": line,
            }
        )
    if not rows:
        raise InputError(f"{path}: no lists")
    if s.codebook_path or any("concept" in it for r in rows for it in r["items"]):
        codes = read_codebook(s.codebook_path) if s.codebook_path else None
        try:
            _code(rows, codes)
        except InputError as e:
            raise InputError(f"{path}: {e}") from None
    return rows, {q: text for q, (text, _) in texts.items()}
