"""What the judge report answers of position: imported pairs judged in both orders (does the
answer shown first win?) or once in a random order (does the first-shown answer win more than
half the decisive verdicts?); and the formatting the report's answers share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmaudit.reporting import fmt, get, num, pval
from lmaudit.reporting.page import Verdict

__all__ = ["pct", "position_answer", "primary", "randomized_answer"]


def pct(x: Any) -> str:
    return "—" if num(x) is None else f"{100 * float(x):.1f}%"


def primary(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The comparisons of a condition with the reference (not the repeat baseline)."""
    return [d for d in results.get("disagreement") or [] if "repeat_pairs" not in d]


def randomized_answer(results: Mapping[str, Any]) -> Verdict | None:
    """The answer of an import whose pairs were judged once each, in a random order: the
    randomization test of first-position wins (``order_swap.randomized``)."""
    r = get(results, "order_swap", "randomized")
    if not r or not r.get("decisive"):
        return None
    alpha = float(get(results, "params", "alpha") or 0.05)
    if r["p_value"] < alpha:
        lean = "first" if r["rate"] > 0.5 else "second"
        head = f"The judge favours the answer shown {lean}"
    else:
        head = "This does not separate the judge from one without position bias"
    ci = r["ci"]
    return Verdict(
        f"Each pair was judged once, in its recorded order: the answer shown first won {r['first_wins']} of "
        f"{r['decisive']} decisive verdicts ({pct(r['rate'])}, exact {100 * (1 - alpha):g}% interval "
        f"[{pct(ci['low'])}, {pct(ci['high'])}], p {pval(r['p_value'])}). {head}, provided the order was "
        "drawn at random, independently of the answers (the file cannot show that).",
        (
            f"Shown in order 1 (A first): {r['order_1']}; order 2 (B first): {r['order_2']}; "
            f"{r['ties']} TIE and {r['invalid']} invalid verdicts left out.",
        ),
    )


def _ci(x: Mapping[str, Any]) -> str:
    return f"[{pct(get(x, 'ci', 'low'))}, {pct(get(x, 'ci', 'high'))}]"


def _position_facts(results: Mapping[str, Any], counts: str) -> list[str]:
    """The numbers behind a both-orders answer: the order's effect on the verdicts, the secondary
    per-verdict reading, Shi et al.'s two measures, the win rates, any one-order verdicts."""
    sw = results["order_swap"]
    out = [
        f"{d['changed']} of {d['n']} pairs changed their winner when the order was swapped "
        f"({pct(d['rate'])}, exact interval {_ci(d)}; a change to or from TIE counts)."
        for d in primary(results)
        if d.get("n")
    ]
    v = sw.get("per_verdict") or {}
    if v.get("n"):
        out.append(
            f"Among all {v['n']} decisive verdicts of the valid pairs (both orders; one pair's two are not "
            f"independent) the answer shown first won {v['first']} ({pct(v['rate'])}, {_ci(v)})."
        )
    pc, pf = sw.get("position_consistency") or {}, sw.get("preference_fairness") or {}
    if pc.get("n"):
        out.append(
            f"Position consistency {pc['consistent']} of {pc['n']} ({pct(pc['rate'])}, {_ci(pc)}); preference "
            f"fairness {fmt(pf.get('value'), '+.3f')} (below 0 the first-shown answer is preferred, above 0 the "
            "second)."
        )
    wr = sw.get("win_rates") or {}
    if wr.get("models"):
        out.append(
            "The models' ranking "
            + ("changes" if wr.get("ranking_changes") else "does not change")
            + " between the balanced win rates (both orders) and a single order."
        )
    r = sw.get("randomized")
    if r and r.get("decisive"):
        out.append(
            f"Pairs judged in one order only: the answer shown first won {r['first_wins']} of {r['decisive']} "
            f"decisive verdicts ({pct(r['rate'])}, {_ci(r)}, p = {pval(r['p_value'])})."
        )
    return [*out, counts]


def position_answer(results: Mapping[str, Any], counts: str) -> Verdict | None:
    """Imported pairs judged in both orders: whether the first-shown answer wins (``counts``: the
    run's line of judgments counted, last among the facts)."""
    """The answer of an import whose pairs were judged in both orders: position bias, read on
    the pairs whose winner flipped with the order (exact sign test of p = 1/2), at the study's α."""
    sw = results.get("order_swap") or {}
    c = sw.get("counts") or {}
    if not c.get("n") or c["n"] == c.get("invalid"):
        return None
    alpha = float(get(results, "params", "alpha") or 0.05)
    f = sw["flipped"]
    if not f.get("n"):
        head = (
            f"No pair's winner flipped with the order: of the {c['n']} pairs judged in both orders, "
            f"{c['consistent']} got the same winner both times, {c['one_tie']} a TIE in one order only and "
            f"{c['invalid']} an invalid verdict, so the flipped pairs cannot show a position bias."
        )
        return Verdict(head, _position_facts(results, counts))
    lead = (
        f"The answer shown first wins {pct(f['rate'])} {_ci(f)} of the {f['n']} pairs whose winner flipped "
        f"with the order ({f['first_both']} of {f['n']}, exact sign test p = {pval(f['p'])})"
    )
    if f["p"] < alpha:
        side = "first" if f["rate"] > 0.5 else "second"
        head = f"{lead}: the judge favours the answer shown {side} (significant at α = {alpha:g})."
    else:
        head = f"{lead}: this does not separate the judge from one without position bias at α = {alpha:g}."
    return Verdict(head, _position_facts(results, counts))
