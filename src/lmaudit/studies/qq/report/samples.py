"""What was asked and answered, per QQ item: its two questions, the exact prompts of the plan
(every mapping, order and position) and the label probabilities measured for each."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lmaudit.reporting import fmt, get, text
from lmaudit.reporting.page import MAX_SAMPLES, Sample

if TYPE_CHECKING:
    from lmaudit.studies.qq.results import ItemResult, QQResults

__all__ = ["samples", "wordings"]

QUESTION = {"A": "question A", "B": "question B"}


def _conversation(messages: Iterable[Mapping[str, Any]]) -> str:
    return "\n".join(f"[{m.get('role')}] {m.get('content')}" for m in messages)


def _question(turn: Mapping[str, Any]) -> str:
    """The question of a rendered user turn: its last paragraph (a legend, header or vignette
    comes before it)."""
    return str(turn.get("content") or "").strip().split("\n\n")[-1]


def _cells(plan: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return [c for c in get(plan, "cells") or [] if isinstance(c, Mapping)]


def wordings(plan: Mapping[str, Any] | None) -> dict[str, tuple[str, str]]:
    """Item id -> (question A, question B) as the plan's prompts put them (order AB, the
    conversation that asks both)."""
    out: dict[str, tuple[str, str]] = {}
    for c in _cells(plan):
        prompts = c.get("prompts") or []
        if c.get("order") != "AB" or len(prompts) < 2 or str(c.get("item")) in out:
            continue
        users = [m for m in prompts[1] if isinstance(m, Mapping) and m.get("role") == "user"]
        if len(users) >= 2:
            out[str(c.get("item"))] = (_question(users[-2]), _question(users[-1]))
    return out


def _position_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        row.get("item"),
        row.get("mapping"),
        row.get("order"),
        row.get("position"),
        row.get("first_answer"),
    )


def _read_out(row: Mapping[str, Any], labels: list[str]) -> str:
    """One position's measured answer: label probabilities (log-prob) or draw counts (sampled)."""
    if row.get("estimand") == "sampled" or row.get("counts"):
        counts = row.get("counts") or {}
        parts = [f"{lab} {counts.get(lab, 0)}" for lab in labels] + [f"other {counts.get('other', 0)}"]
        return "sampled: " + ", ".join(parts) + f" of {text(row.get('n_draws'))} draws"
    probs = row.get("probs") or {}
    labels = labels or sorted(probs)
    parts = [f"P({lab}) = {fmt(probs.get(lab), '.4g')}" for lab in labels]
    return ", ".join(parts) + f", other {fmt(row.get('other'), '.3g')}"


def _unplanned(
    iid: str, measured: Mapping[tuple[Any, ...], list[Mapping[str, Any]]]
) -> list[tuple[str, str]]:
    """An item's measured positions when there is no plan to show the prompts from."""
    return [
        (
            f"{m} · order {o} · position {p}{'' if f is None else ' after ' + ('yes' if f == 'y' else 'no')}",
            "; ".join(_read_out(r, []) for r in rows),
        )
        for (i, m, o, p, f), rows in sorted(measured.items(), key=lambda kv: str(kv[0]))
        if i == iid
    ]


def _where(cell: Mapping[str, Any], position: int, first: str | None) -> str:
    order = str(cell.get("order") or "")
    label_of = cell.get("label_of") or {}
    q = order[position - 1] if len(order) >= position else "?"
    after = (
        ""
        if first is None
        else f", after answer {label_of.get(first, first)} ({'yes' if first == 'y' else 'no'})"
    )
    legend = f"{label_of.get('y')} = yes, {label_of.get('n')} = no"
    return f"{cell.get('mapping')} ({legend}) · order {order} · position {position}: question {q}{after}"


def _item_sample(
    item: ItemResult,
    cells: list[Mapping[str, Any]],
    measured: Mapping[tuple[Any, ...], list[Mapping[str, Any]]],
    wording: tuple[str, str] | None,
) -> Sample:
    iid = item.item
    prompts: list[str] = []
    answers: list[tuple[str, str]] = []
    for cell in cells:
        labels = [str(x) for x in cell.get("labels") or []]
        steps = ((1, None), (2, "y"), (2, "n"))
        for prompt, (position, first) in zip(cell.get("prompts") or [], steps, strict=False):
            where = _where(cell, position, first)
            prompts.append(f"── {where} ──\n{_conversation(prompt)}")
            rows = measured.get((iid, cell.get("mapping"), cell.get("order"), position, first)) or []
            answers.append((where, "; ".join(_read_out(r, labels) for r in rows) or "not measured"))
    if not cells:
        answers = _unplanned(iid, measured)
    verdict = item.verdict
    head = f"{verdict} · q = {fmt(item.q, '+.3f')} · OSS = {fmt(item.oss)} · Γ {item.gamma_class}"
    per_mapping = [(f"q, OSS ({m.mapping})", f"{fmt(m.q, '+.3f')}, {fmt(m.oss)}") for m in item.mappings]
    facts = [
        ("QQ verdict", verdict),
        ("q (pooled)", fmt(item.q, "+.3f")),
        ("q envelope", f"[{fmt(item.q_env.lo, '+.3f')}, {fmt(item.q_env.hi, '+.3f')}]"),
        ("OSS", fmt(item.oss)),
        ("Γ class", item.gamma_class),
        ("saturated", "yes" if item.saturated else "no"),
        ("max other mass", fmt(item.max_other, ".3g")),
        ("stratum", text(item.stratum)),
        *per_mapping,
    ]
    title = f"A: {wording[0]}  ·  B: {wording[1]}" if wording else "wording not recorded (no plan)"
    return Sample(
        id=iid,
        title=title,
        prompt="\n\n".join(prompts) or "not recorded (the measurements were analysed without their plan)",
        answer=head,
        facts=[*answers, *facts],
        flagged=verdict == "INDETERMINATE",
    )


def samples(
    results: QQResults, plan: Mapping[str, Any] | None, rows: Iterable[Mapping[str, Any]]
) -> tuple[list[Sample], int]:
    """One sample per analysed item (at most ``MAX_SAMPLES``) and how many items there are."""
    measured: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("kind", "position") == "position":
            measured.setdefault(_position_key(row), []).append(row)
    by_item: dict[str, list[Mapping[str, Any]]] = {}
    for c in _cells(plan):
        by_item.setdefault(str(c.get("item")), []).append(c)
    words = wordings(plan)
    items = results.items
    out = [
        _item_sample(it, by_item.get(it.item, []), measured, words.get(it.item)) for it in items[:MAX_SAMPLES]
    ]
    return out, len(items)
