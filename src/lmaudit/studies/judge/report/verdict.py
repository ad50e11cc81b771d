"""The judge report's answer (:func:`verdict`) and what went wrong (:func:`alerts`), from the
results alone: did a content-preserving change of presentation change the judge's verdicts,
and could the run tell at all."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lmaudit.reporting import fmt, num, pval
from lmaudit.reporting.page import Verdict
from lmaudit.studies.judge.report.position import pct, position_answer, randomized_answer

if TYPE_CHECKING:
    from lmaudit.results import Interval
    from lmaudit.studies.judge.results import JudgeResults
    from lmaudit.studies.judge.sections import Shift

__all__ = ["alerts", "pct", "verdict"]

LABELS = ("A", "B", "TIE")


def _and(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _empty_conditions(results: JudgeResults) -> list[str]:
    """Conditions judged without a single valid verdict."""
    return [cid for cid in results.conditions_analysed if not results.conditions[cid].counts.valid]


def _why_not(results: JudgeResults) -> str | None:
    """Why the run cannot answer the study's question (``None`` when it can)."""
    bad, n = results.validity.invalid, results.validity.judgments
    ref = results.reference
    conds = list(results.conditions_analysed)
    tool = results.tool_format
    if not n:
        return "Nothing was analysed: the run holds no judgments."
    if bad == n and tool:
        return (
            f"{bad} of {n} imported verdicts were invalid: the {tool} file records no winner "
            "for any of them, so there is no verdict to compare."
        )
    if bad == n:
        return (
            f"{bad} of {n} judge outputs were invalid: none is in the rubric's WINNER / CONFIDENCE / "
            "REASON format, so there is no verdict to compare."
        )
    empty = _empty_conditions(results)
    if empty:
        by = results.validity.by_condition
        said = [
            f"{cid} ({by[cid].invalid if cid in by else 0} of {by[cid].judgments if cid in by else 0} invalid)"
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
    prim = results.primary
    if not prim:
        return (
            f"Only the reference condition {ref} was judged: there is no change of presentation to compare "
            "with it. Combine the conditions' judgments (docs/judge.md, 'Sweeps')."
        )
    if not any(d.n for d in prim):
        return f"No prompt has a valid verdict both under {ref} and under another condition."
    return None


def _unit(results: JudgeResults) -> str:
    return "prompts" if results.k == 1 else "prompt-replicate pairs"


def _headline(results: JudgeResults) -> str:
    ref = results.reference
    prim = [d for d in results.primary if d.n]
    parts = [f"{d.changed} of {d.n} under {d.condition} ({pct(d.rate)})" for d in prim]
    if any(d.changed for d in prim):
        head = f"The presentation changed the judge's verdicts: against {ref}, {_and(parts)} changed."
    else:
        head = (
            f"No change of presentation changed the judge's verdict: against {ref}, {_and(parts)} changed "
            "(zero recorded changes do not show that the presentation has no effect)."
        )
    pat = results.patterns
    if pat.evaluable and pat.n_both_decisive:
        r = pat.roles
        head += (
            f" The wrapped answer won under both {r.PA} and {r.PB} in {pat.attraction.count} of the "
            f"{pat.n_both_decisive} {_unit(results)} where both chose A or B (attraction), the unwrapped one "
            f"in {pat.aversion.count} (aversion)."
        )
    return head


def _facts(results: JudgeResults) -> list[str]:
    ref = results.reference
    out = []
    rep = results.repeat
    if rep is not None and rep.n:
        out.append(
            f"For scale: {ref} judged again (replicate r against r + 1) changed {rep.changed} of "
            f"{rep.n} ({pct(rep.rate)}), the judge's own instability with nothing changed."
        )
    conf = 100 * (1 - results.alpha)
    for d in results.primary:
        if not d.n:
            out.append(f"{d.comparison}: no pair with a valid verdict on both sides.")
            continue
        s = d.sign_test
        fact = (
            f"{d.comparison}: {d.changed} of {d.n} changed ({pct(d.rate)}; exact {conf:g}% "
            f"interval {pct(d.ci.low)} to {pct(d.ci.high)}); {s.toward_A} moved "
            f"toward A, {s.toward_B} toward B (sign test p = {pval(s.p)})"
        )
        if d.excluded_invalid:
            fact += f"; {d.excluded_invalid} left out (invalid)"
        out.append(fact + ".")
    cls = results.classification
    if cls.evaluable:
        counts = [f"{c} {n}" for c, n in (cls.counts or {}).items() if n]
        if counts:
            out.append(f"Per-prompt classes over the {_unit(results)}: {', '.join(counts)}.")
    wins = results.model_wins
    if (
        wins.evaluable
        and wins.ranking_changes is not None
        and results.validity.invalid < results.validity.judgments
    ):
        over = "/".join(wins.ranking_compared)
        out.append(
            f"Model ranking after unblinding: {'changes' if wins.ranking_changes else 'unchanged'} across {over}."
        )
    out.append(_counts(results))
    return out


def _counts(results: JudgeResults) -> str:
    bad, n = results.validity.invalid, results.validity.judgments
    conds = results.conditions_analysed
    if results.tool_format:
        return (
            f"{n} imported verdicts ({results.n_prompts} pairs, {len(conds)} "
            f"{'order' if len(conds) == 1 else 'orders'}), {bad} invalid."
        )
    return (
        f"{n} judgments ({results.n_prompts} prompts × {results.k} "
        f"{'replicate' if results.k == 1 else 'replicates'} × {len(conds)} "
        f"{'condition' if len(conds) == 1 else 'conditions'}), {bad} invalid."
    )


def _validity_facts(results: JudgeResults) -> list[str]:
    """What a run that could not answer did record: each condition's valid and invalid count."""
    by = results.validity.by_condition
    out = []
    for cid in results.conditions_analysed:
        v = by.get(cid)
        line = f"{cid}: {v.valid if v else 0} valid, {v.invalid if v else 0} invalid of {v.judgments if v else 0} judgments"
        c = results.conditions[cid].counts if cid in results.conditions else None
        out.append(line + (f" (A {c.A}, B {c.B}, TIE {c.TIE})" if c else "") + ".")
    return [*out, _counts(results)]


def _signed(x: float | None) -> str:
    """A probability difference: three decimals, or two significant digits below 0.0005 (a shift
    of 1e-6 shows as such, not as 0.000)."""
    f = num(x)
    if f is None:
        return "—"
    return f"{f:+.3f}" if f == 0 or abs(f) >= 5e-4 else f"{f:+.1e}"


def _shift(x: Shift, v: str) -> str:
    ci: Interval | None = x.ci[v]
    where = f" [{_signed(ci.lo)}, {_signed(ci.hi)}]" if ci is not None else " (no interval)"
    return f"P({v}) {_signed(x.mean[v])}{where}"


def _readout_answer(results: JudgeResults, why: str) -> Verdict | None:
    """When the text verdicts cannot answer, the log-prob readout can: each condition's shift of
    P(A), P(B), P(TIE) against the reference over prompts, with its interval (None: no readout)."""
    ref = results.reference
    readout = results.readout
    shifted = {cid: r.shift_vs_reference for cid, r in readout.items() if r.shift_vs_reference is not None}
    if not shifted:
        return None
    moved = [f"{_shift(x, v)} under {cid}" for cid, x in shifted.items() for v in x.moved()]
    n = max(x.n for x in shifted.values())
    how = next(iter(shifted.values())).interval or "interval over prompts"
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
            f"{cid}: mean P(A) {fmt(r.mean.A)}, P(B) {fmt(r.mean.B)}, "
            f"P(TIE) {fmt(r.mean.TIE)}; off the labels {fmt(r.other.mean)} "
            f"(max {fmt(r.other.max)})"
        )
        if cid in shifted:
            line += "; against " + ref + ": " + ", ".join(_shift(shifted[cid], v) for v in LABELS)
        facts.append(line + ".")
    facts.append(_counts(results))
    return Verdict(head, facts)


def verdict(results: JudgeResults) -> Verdict:
    position = position_answer(results, _counts(results)) if results.tool_format else None
    if position is not None:
        return position
    why = _why_not(results)
    if why is not None:
        randomized = randomized_answer(results)
        if randomized is not None:
            return randomized
        judged = results.validity.judgments
        by_readout = _readout_answer(results, why) if judged else None
        if by_readout is not None:
            return by_readout
        return Verdict(why, _validity_facts(results) if judged else (), answered=False)
    return Verdict(_headline(results), _facts(results))


def _sentence(s: str) -> str:
    s = s.strip()
    return (s[:1].upper() + s[1:]).rstrip(".") + "."


def alerts(results: JudgeResults) -> list[str]:
    out = [f"Deviation: {d.id}. {_sentence(d.description)}" for d in results.deviations]
    bad, n = results.validity.invalid, results.validity.judgments
    if bad:
        by = results.validity.by_condition
        per = [f"{cid} {v.invalid} of {v.judgments}" for cid, v in by.items() if v.invalid]
        top = results.validity.top_errors(3)
        what = "imported verdicts" if results.tool_format else "judge outputs"
        out.append(
            f"{bad} of {n} {what} ({pct(bad / n)}) were invalid ({'; '.join(per)}); most often: "
            + "; ".join(f"{e} ({k}×)" for e, k in top)
            + ". They are kept raw, never given a label, and a pair with an invalid side is left out."
        )
    readout = results.design.readout or ""
    if readout.startswith("failed"):
        out.append(f"The log-prob readout {readout}; the verdicts stand without it.")
    unclassified = results.classification.unclassified
    if unclassified:
        out.append(
            f"{unclassified} {_unit(results)} could not be classified: a label a rule needs is invalid."
        )
    return out
