"""The judge report's answer (:func:`verdict`) and what went wrong (:func:`alerts`), from the
results alone: did a content-preserving change of presentation change the judge's verdicts,
and could the run tell at all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmaudit.reporting import fmt, get, num, pval
from lmaudit.reporting.page import Verdict
from lmaudit.studies.judge.report.position import pct, position_answer, primary, randomized_answer

__all__ = ["alerts", "pct", "primary", "repeat", "tool_format", "verdict"]

LABELS = ("A", "B", "TIE")


def _and(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def repeat(results: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The reference against itself (replicate r against r + 1), when k >= 2."""
    return next((d for d in results.get("disagreement") or [] if "repeat_pairs" in d), None)


def tool_format(results: Mapping[str, Any]) -> str | None:
    """The other tool whose file the run imported (``fastchat``, ``alpaca_eval``), or None for a
    run lmaudit judged (or an import of lmaudit's own result files)."""
    if results.get("mode") != "import":
        return None
    return get(results, "design", "format") or None


def _invalid(results: Mapping[str, Any]) -> tuple[int, int]:
    v = results.get("validity") or {}
    return int(v.get("invalid") or 0), int(v.get("judgments") or 0)


def _empty_conditions(results: Mapping[str, Any]) -> list[str]:
    """Conditions judged without a single valid verdict."""
    summaries = results.get("conditions") or {}
    return [
        cid
        for cid in results.get("conditions_analysed") or []
        if not sum(int(get(summaries, cid, "counts", lab) or 0) for lab in LABELS)
    ]


def _why_not(results: Mapping[str, Any]) -> str | None:
    """Why the run cannot answer the study's question (``None`` when it can)."""
    bad, n = _invalid(results)
    ref = results.get("reference") or "P0"
    conds = list(results.get("conditions_analysed") or [])
    if not n:
        return "Nothing was analysed: the run holds no judgments."
    if bad == n and tool_format(results):
        return (
            f"{bad} of {n} imported verdicts were invalid: the {tool_format(results)} file records no winner "
            "for any of them, so there is no verdict to compare."
        )
    if bad == n:
        return (
            f"{bad} of {n} judge outputs were invalid: none is in the rubric's WINNER / CONFIDENCE / "
            "REASON format, so there is no verdict to compare."
        )
    empty = _empty_conditions(results)
    if empty:
        by = get(results, "validity", "by_condition") or {}
        said = [
            f"{cid} ({get(by, cid, 'invalid') or 0} of {get(by, cid, 'judgments') or 0} invalid)"
            for cid in empty
        ]
        return (
            f"No valid judgment under {_and(said)}: {'its' if len(empty) == 1 else 'their'} verdicts "
            f"cannot be compared with {ref}."
        )
    if ref not in conds:
        return (
            f"The reference condition {ref} was not judged in this run (judged: {', '.join(conds)}), so no "
            "condition can be compared with it. Combine the conditions' judgments (docs/judge.md, 'Sweeps')."
        )
    prim = primary(results)
    if not prim:
        return (
            f"Only the reference condition {ref} was judged: there is no change of presentation to compare "
            "with it. Combine the conditions' judgments (docs/judge.md, 'Sweeps')."
        )
    if not any(d.get("n") for d in prim):
        return f"No prompt has a valid verdict both under {ref} and under another condition."
    return None


def _unit(results: Mapping[str, Any]) -> str:
    return "prompts" if int(results.get("k") or 1) == 1 else "prompt-replicate pairs"


def _headline(results: Mapping[str, Any]) -> str:
    ref = results.get("reference") or "P0"
    prim = [d for d in primary(results) if d.get("n")]
    parts = [f"{d['changed']} of {d['n']} under {d['condition']} ({pct(d['rate'])})" for d in prim]
    if any(d["changed"] for d in prim):
        head = f"The presentation changed the judge's verdicts: against {ref}, {_and(parts)} changed."
    else:
        head = (
            f"No change of presentation changed the judge's verdict: against {ref}, {_and(parts)} changed "
            "(zero recorded changes do not show that the presentation has no effect)."
        )
    pat = results.get("patterns") or {}
    if pat.get("evaluable") and pat.get("n_both_decisive"):
        r = pat["roles"]
        head += (
            f" The wrapped answer won under both {r['PA']} and {r['PB']} in {pat['attraction']['count']} of the "
            f"{pat['n_both_decisive']} {_unit(results)} where both chose A or B (attraction), the unwrapped one "
            f"in {pat['aversion']['count']} (aversion)."
        )
    return head


def _facts(results: Mapping[str, Any]) -> list[str]:
    ref = results.get("reference") or "P0"
    out = []
    rep = repeat(results)
    if rep is not None and rep.get("n"):
        out.append(
            f"For scale: {ref} judged again (replicate r against r + 1) changed {rep['changed']} of "
            f"{rep['n']} ({pct(rep['rate'])}), the judge's own instability with nothing changed."
        )
    conf = 100 * (1 - float(get(results, "params", "alpha") or 0.05))
    for d in primary(results):
        if not d.get("n"):
            out.append(f"{d['comparison']}: no pair with a valid verdict on both sides.")
            continue
        s = d.get("sign_test") or {}
        fact = (
            f"{d['comparison']}: {d['changed']} of {d['n']} changed ({pct(d['rate'])}; exact {conf:g}% "
            f"interval {pct(get(d, 'ci', 'low'))} to {pct(get(d, 'ci', 'high'))}); {s.get('toward_A', 0)} moved "
            f"toward A, {s.get('toward_B', 0)} toward B (sign test p = {pval(s.get('p'))})"
        )
        if d.get("excluded_invalid"):
            fact += f"; {d['excluded_invalid']} left out (invalid)"
        out.append(fact + ".")
    cls = results.get("classification") or {}
    if cls.get("evaluable"):
        counts = [f"{c} {n}" for c, n in (cls.get("counts") or {}).items() if n]
        if counts:
            out.append(f"Per-prompt classes over the {_unit(results)}: {', '.join(counts)}.")
    wins = results.get("model_wins") or {}
    if (
        wins.get("evaluable")
        and wins.get("ranking_changes") is not None
        and _invalid(results)[0] < _invalid(results)[1]
    ):
        over = "/".join(wins.get("ranking_compared") or [])
        out.append(
            f"Model ranking after unblinding: {'changes' if wins['ranking_changes'] else 'unchanged'} across {over}."
        )
    out.append(_counts(results))
    return out


def _counts(results: Mapping[str, Any]) -> str:
    bad, n = _invalid(results)
    conds = results.get("conditions_analysed") or []
    if tool_format(results):
        return (
            f"{n} imported verdicts ({results.get('n_prompts', 0)} pairs, {len(conds)} "
            f"{'order' if len(conds) == 1 else 'orders'}), {bad} invalid."
        )
    return (
        f"{n} judgments ({results.get('n_prompts', 0)} prompts × {results.get('k', 0)} "
        f"{'replicate' if results.get('k') == 1 else 'replicates'} × {len(conds)} "
        f"{'condition' if len(conds) == 1 else 'conditions'}), {bad} invalid."
    )


def _validity_facts(results: Mapping[str, Any]) -> list[str]:
    """What a run that could not answer did record: each condition's valid and invalid count."""
    by = get(results, "validity", "by_condition") or {}
    out = [
        f"{cid}: {get(by, cid, 'valid') or 0} valid, {get(by, cid, 'invalid') or 0} invalid of "
        f"{get(by, cid, 'judgments') or 0} judgments"
        + (
            f" (A {c['A']}, B {c['B']}, TIE {c['TIE']})"
            if (c := get(results, "conditions", cid, "counts"))
            else ""
        )
        + "."
        for cid in results.get("conditions_analysed") or []
    ]
    return [*out, _counts(results)]


def _signed(x: Any) -> str:
    """A probability difference: three decimals, or two significant digits below 0.0005 (a shift
    of 1e-6 shows as such, not as 0.000)."""
    f = num(x)
    if f is None:
        return "—"
    return f"{f:+.3f}" if f == 0 or abs(f) >= 5e-4 else f"{f:+.1e}"


def _shift(x: Mapping[str, Any], v: str) -> str:
    ci = get(x, "ci", v)
    where = f" [{_signed(ci[0])}, {_signed(ci[1])}]" if ci else " (no interval)"
    return f"P({v}) {_signed(get(x, 'mean', v))}{where}"


def _readout_answer(results: Mapping[str, Any], why: str) -> Verdict | None:
    """When the text verdicts cannot answer, the log-prob readout can: each condition's shift of
    P(A), P(B), P(TIE) against the reference over prompts, with its interval (None: no readout)."""
    ref = results.get("reference") or "P0"
    readout = results.get("readout") or {}
    shifted = {cid: r["shift_vs_reference"] for cid, r in readout.items() if r.get("shift_vs_reference")}
    if not shifted:
        return None
    moved = [
        f"{_shift(x, v)} under {cid}"
        for cid, x in shifted.items()
        for v in LABELS
        if (ci := get(x, "ci", v)) and (ci[0] > 0 or ci[1] < 0)
    ]
    n = max(int(x.get("n") or 0) for x in shifted.values())
    how = next(iter(shifted.values())).get("interval") or "interval over prompts"
    if moved:
        head = (
            f"From the log-prob readout (the text verdicts cannot answer): the presentation moved the "
            f"judge's label probabilities against {ref} beyond their intervals ({how}, {n} prompts): "
            f"{_and(moved)}."
        )
    else:
        head = (
            f"From the log-prob readout (the text verdicts cannot answer): no change of presentation moved "
            f"P(A), P(B) or P(TIE) against {ref} beyond its interval ({how}, {n} prompts); with so few "
            "prompts this does not show that the presentation has no effect."
        )
    facts = [why]
    for cid, r in readout.items():
        line = (
            f"{cid}: mean P(A) {fmt(get(r, 'mean', 'A'))}, P(B) {fmt(get(r, 'mean', 'B'))}, "
            f"P(TIE) {fmt(get(r, 'mean', 'TIE'))}; off the labels {fmt(get(r, 'other', 'mean'))} "
            f"(max {fmt(get(r, 'other', 'max'))})"
        )
        if cid in shifted:
            line += "; against " + ref + ": " + ", ".join(_shift(shifted[cid], v) for v in LABELS)
        facts.append(line + ".")
    facts.append(_counts(results))
    return Verdict(head, facts)


def verdict(results: Mapping[str, Any]) -> Verdict:
    position = position_answer(results, _counts(results)) if tool_format(results) else None
    if position is not None:
        return position
    why = _why_not(results)
    if why is not None:
        randomized = randomized_answer(results)
        if randomized is not None:
            return randomized
        by_readout = _readout_answer(results, why) if _invalid(results)[1] else None
        if by_readout is not None:
            return by_readout
        return Verdict(why, _validity_facts(results) if _invalid(results)[1] else (), answered=False)
    return Verdict(_headline(results), _facts(results))


def _sentence(s: Any) -> str:
    s = str(s or "").strip()
    return (s[:1].upper() + s[1:]).rstrip(".") + "."


def alerts(results: Mapping[str, Any]) -> list[str]:
    out = [
        f"Deviation: {d.get('id')}. {_sentence(d.get('description'))}"
        for d in results.get("deviations") or []
    ]
    bad, n = _invalid(results)
    if bad:
        by = get(results, "validity", "by_condition") or {}
        per = [
            f"{cid} {v.get('invalid', 0)} of {v.get('judgments', 0)}"
            for cid, v in by.items()
            if v.get("invalid")
        ]
        errors: dict[str, int] = {}
        for v in by.values():
            for e, k in (v.get("errors") or {}).items():
                errors[e] = errors.get(e, 0) + int(k)
        top = sorted(errors.items(), key=lambda x: (-x[1], x[0]))[:3]
        what = "imported verdicts" if tool_format(results) else "judge outputs"
        out.append(
            f"{bad} of {n} {what} ({pct(bad / n)}) were invalid ({'; '.join(per)}); most often: "
            + "; ".join(f"{e} ({k}×)" for e, k in top)
            + ". They are kept raw, never given a label, and a pair with an invalid side is left out."
        )
    readout = str(get(results, "design", "readout") or "")
    if readout.startswith("failed"):
        out.append(f"The log-prob readout {readout}; the verdicts stand without it.")
    unclassified = get(results, "classification", "counts", "NOT_CLASSIFIABLE") or 0
    if unclassified:
        out.append(
            f"{unclassified} {_unit(results)} could not be classified: a label a rule needs is invalid."
        )
    return out
