"""What the judge report answers of position: imported pairs judged in both orders (does the
answer shown first win?) or once in a random order (does the first-shown answer win more than
half the decisive verdicts?); and the formatting the report's answers share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lmaudit.reporting import fmt, num, pval
from lmaudit.reporting.page import Verdict

if TYPE_CHECKING:
    from lmaudit.studies.judge.results import JudgeResults
    from lmaudit.studies.judge.sections import ExactInterval

__all__ = ["pct", "position_answer", "randomized_answer"]


def pct(x: Any) -> str:
    return "—" if num(x) is None else f"{100 * float(x):.1f}%"


def randomized_answer(results: JudgeResults) -> Verdict | None:
    """The answer of an import whose pairs were judged once each, in a random order: the
    randomization test of first-position wins (``order_swap.randomized``)."""
    r = results.order_swap.randomized if results.order_swap is not None else None
    if r is None or not r.decisive:
        return None
    alpha = results.alpha
    if r.p_value < alpha:
        lean = "first" if r.rate is not None and r.rate > 0.5 else "second"
        head = f"The judge favours the answer shown {lean}"
    else:
        head = "This does not separate the judge from one without position bias"
    return Verdict(
        f"Each pair was judged once, in its recorded order: the answer shown first won {r.first_wins} of "
        f"{r.decisive} decisive verdicts ({pct(r.rate)}, exact {100 * (1 - alpha):g}% interval "
        f"[{pct(r.ci.low)}, {pct(r.ci.high)}], p {pval(r.p_value)}). {head}, provided the order was "
        "drawn at random, independently of the answers (the file cannot show that).",
        (
            f"Shown in order 1 (A first): {r.order_1}; order 2 (B first): {r.order_2}; "
            f"{r.ties} TIE and {r.invalid} invalid verdicts left out.",
        ),
    )


def _ci(ci: ExactInterval) -> str:
    return f"[{pct(ci.low)}, {pct(ci.high)}]"


def _position_facts(results: JudgeResults, counts: str) -> list[str]:
    """The numbers behind a both-orders answer: the order's effect on the verdicts, the secondary
    per-verdict reading, Shi et al.'s two measures, the win rates, any one-order verdicts."""
    sw = results.order_swap
    assert sw is not None
    out = [
        f"{d.changed} of {d.n} pairs changed their winner when the order was swapped "
        f"({pct(d.rate)}, exact interval {_ci(d.ci)}; a change to or from TIE counts)."
        for d in results.primary
        if d.n
    ]
    v = sw.per_verdict
    if v.n:
        out.append(
            f"Among all {v.n} decisive verdicts of the valid pairs (both orders; one pair's two are not "
            f"independent) the answer shown first won {v.first} ({pct(v.rate)}, {_ci(v.ci)})."
        )
    pc, pf = sw.position_consistency, sw.preference_fairness
    if pc.n:
        out.append(
            f"Position consistency {pc.consistent} of {pc.n} ({pct(pc.rate)}, {_ci(pc.ci)}); preference "
            f"fairness {fmt(pf.value, '+.3f')} (below 0 the first-shown answer is preferred, above 0 the "
            "second)."
        )
    wr = sw.win_rates
    if wr is not None and wr.models:
        out.append(
            "The models' ranking "
            + ("changes" if wr.ranking_changes else "does not change")
            + " between the balanced win rates (both orders) and a single order."
        )
    r = sw.randomized
    if r is not None and r.decisive:
        out.append(
            f"Pairs judged in one order only: the answer shown first won {r.first_wins} of {r.decisive} "
            f"decisive verdicts ({pct(r.rate)}, {_ci(r.ci)}, p = {pval(r.p_value)})."
        )
    return [*out, counts]


def position_answer(results: JudgeResults, counts: str) -> Verdict | None:
    """The answer of an import whose pairs were judged in both orders: position bias, read on
    the pairs whose winner flipped with the order (exact sign test of p = 1/2), at the study's α
    (``counts``: the run's line of judgments counted, last among the facts)."""
    sw = results.order_swap
    if sw is None:
        return None
    c = sw.counts
    if not c.n or c.n == c.invalid:
        return None
    alpha = results.alpha
    f = sw.flipped
    if not f.n:
        head = (
            f"No pair's winner flipped with the order: of the {c.n} pairs judged in both orders, "
            f"{c.consistent} got the same winner both times, {c.one_tie} a TIE in one order only and "
            f"{c.invalid} an invalid verdict, so the flipped pairs cannot show a position bias."
        )
        return Verdict(head, _position_facts(results, counts))
    lead = (
        f"The answer shown first wins {pct(f.rate)} {_ci(f.ci)} of the {f.n} pairs whose winner flipped "
        f"with the order ({f.first_both} of {f.n}, exact sign test p = {pval(f.p)})"
    )
    if f.p < alpha:
        side = "first" if f.rate is not None and f.rate > 0.5 else "second"
        head = f"{lead}: the judge favours the answer shown {side} (significant at α = {alpha:g})."
    else:
        head = f"{lead}: this does not separate the judge from one without position bias at α = {alpha:g}."
    return Verdict(head, _position_facts(results, counts))
