"""What the judge was asked and answered: for each prompt and condition, the exact rendered
judge prompt (from the plan's frozen packet: the rubric, the user's prompt and the two
responses, wrapped where the condition wraps them) and every verdict the judge wrote (raw, as
returned, with the label parsed from it), flagged when a label differs from the reference's."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lmaudit.reporting import get
from lmaudit.reporting.page import MAX_SAMPLES, Sample

if TYPE_CHECKING:
    from lmaudit.studies.judge.results import JudgeResults

__all__ = ["question", "questions", "samples"]

_PLACEHOLDER = re.compile(r"\{(rubric|prompt|response_a|response_b)\}")
TITLE_CHARS = 120


def question(content: str, template: str, values: Mapping[str, str]) -> str | None:
    """The user's prompt inside a rendered judge prompt: the template matched against
    ``content`` with the rubric and both responses known (``None`` when it does not match)."""
    pattern, last = "", 0
    for m in _PLACEHOLDER.finditer(template):
        pattern += re.escape(template[last : m.start()])
        name = m.group(1)
        pattern += "(?P<prompt>.*)" if name == "prompt" else re.escape(values.get(name, ""))
        last = m.end()
    pattern += re.escape(template[last:])
    found = re.fullmatch(pattern, content, flags=re.DOTALL)
    return found.group("prompt") if found and "prompt" in found.groupdict() else None


def _packet_items(plan: Mapping[str, Any] | None) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {
        (cid, str(it.get("prompt_id"))): it
        for cid, packet in (get(plan, "packets") or {}).items()
        for it in packet.get("items") or []
    }


def questions(plan: Mapping[str, Any] | None) -> dict[str, str]:
    """Each prompt id's question as the judge read it (empty without the plan's packets)."""
    template = str(get(plan, "config", "judge", "rubric", "template") or "")
    rubric = str(get(plan, "rubric") or get(plan, "config", "judge", "rubric", "text") or "")
    out: dict[str, str] = {}
    for (_cid, pid), it in _packet_items(plan).items():
        if pid in out or not template:
            continue
        users = [m for m in it.get("messages") or [] if m.get("role") == "user"]
        values = {
            "rubric": rubric,
            "response_a": it.get("response_a", ""),
            "response_b": it.get("response_b", ""),
        }
        q = question(str(users[-1].get("content", "")), template, values) if users else None
        if q is not None:
            out[pid] = q
    return out


def _short(s: str) -> str:
    s = " ".join(s.split())
    return s if len(s) <= TITLE_CHARS else s[: TITLE_CHARS - 1] + "…"


def _label(row: Mapping[str, Any]) -> str:
    """The label as parsed (and, for a swapped condition, in the original orientation)."""
    if not row.get("valid"):
        return f"invalid ({row.get('error') or 'no reason recorded'})"
    shown, orig = row.get("winner"), row.get("winner_original")
    if row.get("swap") and shown is not None and shown != orig:
        return f"{shown} as displayed, {orig} in the original orientation"
    return str(orig)


def _answer_text(row: Mapping[str, Any]) -> str:
    if row.get("raw") is not None:
        return str(row["raw"])
    # imported verdicts carry their fields, not the judge's text
    return (
        f"(recorded fields, imported) winner: {row.get('winner_original') or 'none'}; confidence: "
        f"{row.get('confidence') if row.get('confidence') is not None else 'none'}; reason: {row.get('reason') or 'none'}"
    )


def _group(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("kind") == "judgment":
            out.setdefault((str(r.get("condition")), str(r.get("item"))), []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: (int(r.get("replicate") or 0), int(r.get("attempt") or 0)))
    return out


def _prompt(it: Mapping[str, Any] | None, imported: bool) -> str:
    if it is None and imported:
        return "not recorded (imported verdicts: the judge prompt was rendered where they were judged)"
    if it is None:
        return (
            "not in this report's records (analysed without the plan; the run's plan.json holds the packets)"
        )
    return "\n".join(f"[{m.get('role')}] {m.get('content')}" for m in it.get("messages") or [])


def samples(
    rows: Iterable[Mapping[str, Any]], plan: Mapping[str, Any] | None, results: JudgeResults
) -> tuple[list[Sample], int]:
    """One sample per prompt and condition, in the results' prompt and condition order."""
    judged = _group(rows)
    packets = _packet_items(plan)
    qs = questions(plan)
    ref = results.reference
    ref_labels = {it.item: it.labels.get(ref) for it in results.items}
    items = [it.item for it in results.items]
    out: list[Sample] = []
    total = 0
    for pid in items:
        for cid in results.conditions_analysed:
            rs = judged.get((cid, pid))
            if not rs:
                continue
            total += 1
            if len(out) >= MAX_SAMPLES:
                continue
            finals = [r for r in rs if r.get("final")]
            refl = ref_labels.get(pid) or ()
            moved = [
                int(r.get("replicate") or 0)
                for r in finals
                if cid != ref
                and r.get("valid")
                and int(r.get("replicate") or 0) < len(refl)
                and refl[int(r.get("replicate") or 0)] not in (None, r.get("winner_original"))
            ]
            parts = []
            for r in rs:
                rep = int(r.get("replicate") or 0)
                head = f"── replicate {rep}"
                if int(r.get("attempt") or 0) or not r.get("final"):
                    head += f", attempt {int(r.get('attempt') or 0) + 1}"
                head += f" · parsed: {_label(r)}"
                if rep in moved and r.get("final"):
                    head += f" · differs from {ref} ({refl[rep]})"
                parts.append(f"{head}\n{_answer_text(r)}")
            labels = " ".join(str(r.get("winner_original") or "invalid") for r in finals)
            first = labels + (f" · differs from {ref} in {len(moved)} of {len(finals)}" if moved else "")
            facts = [
                ("winner per replicate", labels),
                (f"{ref} per replicate", " ".join(str(x or "invalid") for x in refl) or "not judged"),
                ("differs from " + ref, ", ".join(f"replicate {r}" for r in moved) or "no"),
                ("condition", _condition(results, cid)),
            ]
            out.append(
                Sample(
                    id=f"{pid} · {cid}",
                    title=_short(qs.get(pid, pid)),
                    prompt=_prompt(packets.get((cid, pid)), results.mode == "import"),
                    answer=first + "\n\n" + "\n\n".join(parts),
                    facts=facts,
                    flagged=bool(moved),
                )
            )
    return out, total


def _condition(results: JudgeResults, cid: str) -> str:
    c = results.design.condition(cid)
    if c is None:
        return cid
    what = f"wraps {' and '.join(c.wrap)}" if c.wrap else "no wrapper"
    return what + (", A and B exchanged" if c.swap else "")
