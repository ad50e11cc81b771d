"""What the choir run asked and what came back: each list with its member, question, persona and
template, the exact prompt the plan sent, the raw answer and the items extracted from it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lmaudit.reporting import get, text
from lmaudit.reporting.page import MAX_SAMPLES, Sample

__all__ = ["question_texts", "samples"]

NOTE = (
    "Each list: the member that wrote it, the question, the persona (none: unconditioned) and the "
    "template, the prompt exactly as sent (system turn, any worked examples, the question), the raw "
    "answer and the items extracted from it, in rank order. A flagged list was refused or came back empty."
)


def _key(question: Any, condition: Any, temperature: Any) -> tuple[str, str, float | None]:
    t = (
        float(temperature)
        if isinstance(temperature, int | float) and not isinstance(temperature, bool)
        else None
    )
    return str(question), str(condition), t


def _requests(plan: Mapping[str, Any] | None) -> dict[tuple[str, str, float | None], Mapping[str, Any]]:
    return {
        _key(r["meta"].get("question"), r["meta"].get("condition"), r.get("temperature")): r
        for r in (get(plan, "requests") or [])
        if isinstance(r, Mapping) and isinstance(r.get("meta"), Mapping)
    }


def question_texts(plan: Mapping[str, Any] | None) -> dict[str, str]:
    """Each question id's wording, as the plan asked it (none for imported lists)."""
    out: dict[str, str] = {}
    for r in get(plan, "requests") or []:
        meta = r.get("meta") if isinstance(r, Mapping) else None
        if isinstance(meta, Mapping) and meta.get("question_text"):
            out.setdefault(str(meta.get("question")), str(meta["question_text"]))
    return out


def _prompt(request: Mapping[str, Any] | None) -> str:
    messages = (request or {}).get("messages") or []
    return "\n\n".join(f"[{m.get('role')}]\n{m.get('content')}" for m in messages) or (
        "not recorded (imported lists: the prompt is the source's)"
    )


def _items(row: Mapping[str, Any]) -> str:
    items = [str(it.get("text")) for it in row.get("items") or [] if isinstance(it, Mapping)]
    return "; ".join(f"{k}. {t}" for k, t in enumerate(items, start=1)) or "none"


def samples(rows: Iterable[Mapping[str, Any]], plan: Mapping[str, Any] | None) -> tuple[list[Sample], int]:
    """Every list (and refused generation) of the measurement rows, the first
    :data:`~lmaudit.reporting.page.MAX_SAMPLES` as samples; and how many there are."""
    requests = _requests(plan)
    wording = question_texts(plan)
    out: list[Sample] = []
    total = 0
    for row in rows:
        kind = row.get("kind")
        if kind not in ("list", "refused_list"):
            continue
        total += 1
        if len(out) >= MAX_SAMPLES:
            continue
        q, cond = row.get("question"), row.get("condition")
        refused = kind == "refused_list"
        raw = row.get("raw")
        answer = f"refused: {row.get('refusal')}" if refused else (str(raw) if raw else "not recorded")
        facts = [
            ("member", text(row.get("model"))),
            ("question", f"{q}: {wording[str(q)]}" if str(q) in wording else text(q)),
            ("persona", text(row.get("persona"))),
            ("template", text(row.get("template"))),
            ("temperature", text(row.get("temperature"))),
            ("generation", text(row.get("generation"))),
        ]
        if not refused:
            facts.append(("extracted items", _items(row)))
        out.append(
            Sample(
                id=f"{row.get('model')} · {q} · {cond} · t={row.get('temperature')} · g{row.get('generation')}",
                title=wording.get(str(q), str(q)),
                prompt=_prompt(requests.get(_key(q, cond, row.get("temperature")))),
                answer=answer,
                facts=facts,
                flagged=refused or not row.get("items"),
            )
        )
    return out, total
