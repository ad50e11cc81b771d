"""Position bias from pairs judged in both orders: pure, measurement rows in, the results'
``order_swap`` section out (docs/interop.md, "Judge", "What is measured").

Rows that carry a ``pair`` field (FastChat and AlpacaEval imports) are paired by item and
replicate: order 1 (condition ``P0``) shows A (model_1) first, order 2 (``SWAP``) shows B
first. Winners are in the original orientation (A, B, TIE; ``None`` for an error). A
*first-position win* is, in order 1, a win of A and, in order 2, a win of B.

Per pair: ``consistent`` (the same model, or TIE, in both orders), ``first_both`` (the answer
shown first won in both orders: A then B), ``second_both`` (B then A), ``one_tie`` (TIE in
exactly one order), ``invalid`` (an error in either order); ``n`` counts them all.

Two readings of the first-position win rate, each with its Clopper-Pearson interval and an
exact two-sided binomial test of p = 1/2:

* ``flipped`` (primary): ``first_both`` out of ``first_both + second_both``, the pairs whose
  winner flipped with the order; the test is the sign test. Each pair counts once.
* ``per_verdict``: every decisive verdict of the valid pairs, both orders (2 per pair without a
  TIE); first-position wins out of them. The two verdicts of a pair are not independent, so its
  test is a description, not the primary inference.

Each block also holds Shi et al.'s ``position_consistency`` and ``preference_fairness``; the
section adds ``win_rates`` (pairs judged in both orders) and ``randomized`` (pairs judged in one
order only), both from :mod:`.position`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lmaudit.stats.intervals import proportion_ci
from lmaudit.studies.judge.disagreement import exact_interval, sign_test
from lmaudit.studies.judge.import_sections import (
    Flipped,
    OrderSwap,
    PairBlock,
    PairCounts,
    PerVerdict,
    Unpaired,
)
from lmaudit.studies.judge.position import (
    OrderPair,
    consistency_fairness,
    randomized,
    single_verdicts,
    win_rates,
)

__all__ = ["COUNT_KEYS", "OrderPair", "block", "classify", "counts", "order_swap", "pairs_from_rows"]

COUNT_KEYS = ("n", "consistent", "first_both", "second_both", "one_tie", "invalid")
ORDER_1, ORDER_2 = "P0", "SWAP"


def classify(order_1: str | None, order_2: str | None) -> str:
    """The pair's count key (other than ``n``)."""
    if order_1 is None or order_2 is None:
        return "invalid"
    if order_1 == order_2:
        return "consistent"
    if "TIE" in (order_1, order_2):
        return "one_tie"
    return "first_both" if order_1 == "A" else "second_both"


def counts(pairs: Iterable[OrderPair]) -> PairCounts:
    out = dict.fromkeys(COUNT_KEYS, 0)
    for p in pairs:
        out["n"] += 1
        out[classify(p.order_1, p.order_2)] += 1
    return PairCounts(**out)


def verdict_wins(pairs: Iterable[OrderPair]) -> tuple[int, int]:
    """(first-position wins, second-position wins) over the decisive verdicts of valid pairs."""
    first = second = 0
    for p in pairs:
        if p.order_1 is None or p.order_2 is None:
            continue
        first += (p.order_1 == "A") + (p.order_2 == "B")
        second += (p.order_1 == "B") + (p.order_2 == "A")
    return first, second


TEST = "exact two-sided binomial, p = 1/2"


def _binomial(k: int, n: int, alpha: float) -> dict[str, Any]:
    """The fields of a first-position win rate: ``k`` of ``n``, its interval and exact test."""
    ci = proportion_ci(k, n, alpha)
    return {"n": n, "rate": ci.estimate, "ci": exact_interval(ci), "p": sign_test(k, n - k), "test": TEST}


def block(pairs: Sequence[OrderPair], alpha: float) -> PairBlock:
    """Counts and both readings of the first-position win rate for one group of pairs."""
    c = counts(pairs)
    fb, sb = c.first_both, c.second_both
    first, second = verdict_wins(pairs)
    shi = consistency_fairness(pairs, alpha)
    return PairBlock(
        counts=c,
        flipped=Flipped(first_both=fb, **_binomial(fb, fb + sb, alpha)),
        per_verdict=PerVerdict(first=first, second=second, **_binomial(first, first + second, alpha)),
        position_consistency=shi.position_consistency,
        preference_fairness=shi.preference_fairness,
    )


def pairs_from_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[list[OrderPair], dict[str, int]]:
    """The pairs judged in both orders, in first-seen order, and how many final verdicts had
    only one order (``order_1_only``, ``order_2_only``)."""
    sides: dict[tuple[str, int], dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("kind") != "judgment" or not r.get("final") or not r.get("pair"):
            continue
        order = ORDER_2 if r.get("swap") else ORDER_1
        sides.setdefault((str(r["item"]), int(r["replicate"])), {})[order] = r
    pairs, unpaired = [], {"order_1_only": 0, "order_2_only": 0}
    for (item, rep), got in sides.items():
        if len(got) == 1:
            unpaired["order_1_only" if ORDER_1 in got else "order_2_only"] += 1
            continue
        one, two = got[ORDER_1], got[ORDER_2]
        info = one["pair"]
        models = info.get("models") or {}
        pairs.append(
            OrderPair(
                item=item,
                replicate=rep,
                order_1=one["winner_original"] if one.get("valid") else None,
                order_2=two["winner_original"] if two.get("valid") else None,
                judge_prompt=str(info.get("judge_prompt")),
                model_pair=" vs ".join(sorted(str(models.get(s)) for s in ("A", "B"))),
                turn=info.get("turn"),
                model_a=str(models.get("A")),
                model_b=str(models.get("B")),
            )
        )
    return pairs, unpaired


def _groups(pairs: Sequence[OrderPair], key: str, alpha: float) -> dict[str, PairBlock]:
    by: dict[Any, list[OrderPair]] = {}
    for p in pairs:
        v = getattr(p, key)
        if v is not None:
            by.setdefault(v, []).append(p)
    return {str(k): block(by[k], alpha) for k in sorted(by)}


def order_swap(rows: Iterable[Mapping[str, Any]], alpha: float) -> OrderSwap | None:
    """The ``order_swap`` section, or ``None`` when no row carries a ``pair`` (a run that did
    not import pairwise verdicts with their order). ``randomized`` is there when some pairs were
    judged in one order only, ``win_rates`` when some were judged in both."""
    rows = list(rows)
    if not any(r.get("kind") == "judgment" and r.get("pair") for r in rows):
        return None
    pairs, unpaired = pairs_from_rows(rows)
    singles = single_verdicts(rows)
    overall = block(pairs, alpha)
    return OrderSwap(
        orders={"1": f"{ORDER_1}: A (model_1) shown first", "2": f"{ORDER_2}: B (model_2) shown first"},
        first_position_win="order 1: A wins; order 2: B wins",
        primary="flipped: first_both out of first_both + second_both (sign test over the pairs whose "
        "winner flipped with the order)",
        secondary="per_verdict: first-position wins out of every decisive verdict of the valid pairs, "
        "both orders (verdicts of one pair are not independent)",
        alpha=alpha,
        counts=overall.counts,
        flipped=overall.flipped,
        per_verdict=overall.per_verdict,
        position_consistency=overall.position_consistency,
        preference_fairness=overall.preference_fairness,
        unpaired=Unpaired(**unpaired),
        by_judge_prompt=_groups(pairs, "judge_prompt", alpha),
        by_model_pair=_groups(pairs, "model_pair", alpha),
        by_turn=_groups(pairs, "turn", alpha),
        randomized=randomized(singles, alpha) if singles else None,
        win_rates=win_rates(pairs) if pairs else None,
    )
