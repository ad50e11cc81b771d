"""Concept extraction by a language model: a fixed JSON prompt at temperature 0, any backend.

The seed converted raw answers to concept lists with an LLM at temperature 0 and a fixed JSON
extraction prompt (its exact wording is not public). This module's prompt is our own, and it
states the seed's extraction unit: one numbered entry is one concept item. Each distinct raw
answer is asked once, through the cached sampling contract (the request, and so the cache
key, holds the prompt version, the answer, temperature 0, seed 0 and ``max_tokens``).

The reply must be one JSON object ``{"items": [...]}`` (a Markdown code fence around it is
allowed, nothing else), each item a string or ``{"text": ..., "justification": ...}``. Any
other reply is *invalid*: it is kept raw in the measurement row and counted, and the list's
items are then none (``on_invalid: drop``, the default: nothing is made up for a failed
extraction) or the rule extractor's (``on_invalid: rule``, marked as such). Items are cleaned
as the rule extractor cleans them (Markdown emphasis, whitespace); ``N/A`` and empty items are
counted, not kept; at most ``items_per_list`` are kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from lmaudit.backends.base import SampleRequest
from lmaudit.provenance.jsoncheck import strict_loads
from lmaudit.studies.choir.extract import _NA, Extraction, Item, _clean

__all__ = ["PROMPT", "PROMPT_VERSION", "LLMExtraction", "extraction_request", "parse_reply"]

PROMPT_VERSION = "choir-extract/1"
PROMPT = """You convert one answer into a JSON list of its concept items.

Rules:
- One numbered (or bulleted) entry of the answer is one item. Keep the entries in their order.
- "text": the entry's concept as written, without its number, Markdown or justification.
- "justification": the entry's justification or explanation if it gives one, else null.
- Leave out any preamble, closing remark, and entries that are empty or say N/A.
- Do not merge, split, reword or add entries.

Reply with one JSON object and nothing else:
{"items": [{"text": "...", "justification": null}]}

The answer:
<<<
{ANSWER}
>>>"""

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


@dataclass(frozen=True)
class LLMExtraction:
    extraction: Extraction | None  # None: the reply was not valid
    error: str | None  # why the reply is invalid


def extraction_request(raw: str, max_tokens: int) -> SampleRequest:
    """The request for one raw answer (deterministic: temperature 0, seed 0)."""
    return SampleRequest(
        messages=({"role": "user", "content": PROMPT.replace("{ANSWER}", raw.strip())},),
        n=1,
        temperature=0.0,
        max_tokens=max_tokens,
        seed=0,
        meta={"kind": "choir_extraction", "version": PROMPT_VERSION, "raw": raw},
    )


def _item(obj: Any, k: int) -> tuple[str, str | None]:
    if isinstance(obj, str):
        return obj, None
    if isinstance(obj, dict) and isinstance(obj.get("text"), str):
        unknown = sorted(set(obj) - {"text", "justification"})
        if unknown:
            raise ValueError(f"items[{k}] has unknown field(s) {unknown}")
        just = obj.get("justification")
        if just is not None and not isinstance(just, str):
            raise ValueError(f"items[{k}].justification is not a string or null")
        return obj["text"], just
    raise ValueError(f"items[{k}] is not a string or an object with a string 'text'")


def parse_reply(reply: str, limit: int) -> LLMExtraction:
    """The extraction a reply states, or why it is invalid (see the module notes)."""
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        doc = strict_loads(text)
        if not isinstance(doc, dict) or set(doc) != {"items"} or not isinstance(doc["items"], list):
            raise ValueError('not an object {"items": [...]}')
        pairs = [_item(obj, k) for k, obj in enumerate(doc["items"])]
    except (ValueError, json.JSONDecodeError) as e:
        return LLMExtraction(None, str(e).splitlines()[0][:200])
    items: list[Item] = []
    n_na = n_empty = 0
    for body, just in pairs:
        clean = _clean(body)
        if not clean:
            n_empty += 1
        elif _NA.match(clean):
            n_na += 1
        elif len(items) < limit:
            items.append(Item(len(items) + 1, clean, _clean(just) if just else None, False))
    return LLMExtraction(Extraction(tuple(items), len(pairs), n_na, n_empty, False), None)


def extract_rows(
    rows: list[dict[str, Any]], sampler: Any, limit: int, max_tokens: int, on_invalid: str
) -> dict[str, Any]:
    """Re-extract, in place, the items of every list row that has raw text, through
    ``sampler`` (a cached sampling backend); identical raw answers are asked once. Returns the
    counts recorded in the audit."""
    from lmaudit.studies.choir.extract import extract_items

    todo = [r for r in rows if r.get("kind") == "list" and isinstance(r.get("raw"), str)]
    distinct = sorted({r["raw"] for r in todo})
    replies = {}
    if distinct:
        results = sampler.sample(
            [extraction_request(raw, max_tokens) for raw in distinct], desc="choir extraction"
        )
        replies = {raw: res.texts[0] for raw, res in zip(distinct, results, strict=True)}
    invalid = 0
    for r in todo:
        reply = replies[r["raw"]]
        got = parse_reply(reply, limit)
        info: dict[str, Any] = {"method": "llm", "reply": reply}
        if got.extraction is None:
            invalid += 1
            info.update(invalid=True, error=got.error)
            e = extract_items(r["raw"], limit) if on_invalid == "rule" else Extraction((), 0, 0, 0, False)
            info["method"] = "rule_fallback" if on_invalid == "rule" else "llm"
        else:
            e = got.extraction
            info["invalid"] = False
        r["items"] = [i.to_json() for i in e.items]
        r["extraction"] = {
            **info,
            "entries": e.n_entries,
            "na": e.n_na,
            "empty": e.n_empty,
            "preamble": e.preamble,
        }
    return {
        "lists": len(todo),
        "distinct_answers": len(distinct),
        "invalid": invalid,
        "on_invalid": on_invalid,
    }
