"""What position bias does to the numbers a judged comparison reports: pure, used by
:mod:`.order_swap` (docs/interop.md, "Judge", "What is measured").

* :func:`randomized`: verdicts of pairs judged once, in an order drawn at random and recorded
  (AlpacaEval's ``is_switched_outputs``, FastChat lines with one of ``g1_winner``/``g2_winner``).
  Under randomization the answer shown first is, whatever the two answers' quality, equally
  likely to be either one; a judge without position bias then gives the first-shown answer each
  decisive verdict with probability 1/2, so the exact binomial test of the first-position wins
  among decisive verdicts needs no other assumption.
* :func:`consistency_fairness`: position consistency and preference fairness (Shi et al. 2024,
  arXiv 2406.07791, as their code computes them) over pairs judged in both orders.
* :func:`win_rates`: each model's win rate over the pairs judged in both orders, counted over
  both orders (balanced position calibration, Wang et al. 2023, arXiv 2305.17926), beside the
  rates the first order alone and the second order alone give.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lmaudit.stats.intervals import proportion_ci
from lmaudit.studies.judge.disagreement import exact_interval, sign_test
from lmaudit.studies.judge.import_sections import (
    ModelWinRate,
    PositionConsistency,
    PreferenceFairness,
    Randomized,
    WinRates,
)


@dataclass(frozen=True)
class OrderPair:
    """One pair judged in both orders; winners in the original orientation, ``None`` invalid."""

    item: str
    replicate: int
    order_1: str | None  # A (model_1) shown first
    order_2: str | None  # B (model_2) shown first
    judge_prompt: str
    model_pair: str
    turn: int | None = None
    model_a: str = ""
    model_b: str = ""


__all__ = [
    "ASSUMPTION",
    "ShiMeasures",
    "SingleVerdict",
    "consistency_fairness",
    "randomized",
    "single_verdicts",
    "win_rates",
]

ASSUMPTION = (
    "each pair was judged once, in an order drawn at random independently of the answers "
    "(the order recorded with the verdict); under that assumption a judge without position bias "
    "gives the first-shown answer each decisive verdict with probability 1/2"
)


@dataclass(frozen=True)
class SingleVerdict:
    """One final verdict of a pair judged in one order only; winner in the original orientation."""

    order: int  # 1: A shown first, 2: B shown first
    winner: str | None  # A, B, TIE; None invalid
    judge_prompt: str


def single_verdicts(rows: Iterable[Mapping[str, Any]]) -> list[SingleVerdict]:
    """The final verdicts of (item, replicate)s judged in one order only, in first-seen order."""
    sides: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("kind") == "judgment" and r.get("final") and r.get("pair"):
            sides.setdefault((str(r["item"]), int(r["replicate"])), []).append(r)
    out = []
    for got in sides.values():
        if len({bool(r.get("swap")) for r in got}) != 1:
            continue  # judged in both orders
        for r in got:
            out.append(
                SingleVerdict(
                    order=2 if r.get("swap") else 1,
                    winner=r["winner_original"] if r.get("valid") else None,
                    judge_prompt=str(r["pair"].get("judge_prompt")),
                )
            )
    return out


def _first_won(v: SingleVerdict) -> bool:
    return (v.order, v.winner) in ((1, "A"), (2, "B"))


def randomized(verdicts: Sequence[SingleVerdict], alpha: float) -> Randomized:
    """First-position wins among the decisive single-order verdicts: the exact two-sided binomial
    test of p = 1/2 and the Clopper-Pearson interval."""
    decisive = [v for v in verdicts if v.winner in ("A", "B")]
    first = sum(_first_won(v) for v in decisive)
    ci = proportion_ci(first, len(decisive), alpha)
    return Randomized(
        verdicts=len(verdicts),
        order_1=sum(v.order == 1 for v in verdicts),
        order_2=sum(v.order == 2 for v in verdicts),
        ties=sum(v.winner == "TIE" for v in verdicts),
        invalid=sum(v.winner is None for v in verdicts),
        decisive=len(decisive),
        first_wins=first,
        rate=ci.estimate,
        p_value=sign_test(first, len(decisive) - first),
        ci=exact_interval(ci),
        test="exact two-sided binomial, p = 1/2",
        assumption=ASSUMPTION,
    )


def _primacy(p: OrderPair) -> bool:
    """An inconsistent pair whose decisive verdicts went to the answer shown first."""
    return p.order_1 == "A" or p.order_2 == "B"


@dataclass(frozen=True)
class ShiMeasures:
    """Shi et al.'s two measures of one group of pairs."""

    position_consistency: PositionConsistency
    preference_fairness: PreferenceFairness


def consistency_fairness(pairs: Sequence[OrderPair], alpha: float) -> ShiMeasures:
    """Position consistency and preference fairness of Shi et al. over pairs judged in both orders.

    In displayed labels (A: shown first) a pair's two verdicts are consistent (AB, BA, CC, C a
    TIE), primacy-preferred (AA, AC, CA) or recency-preferred (BB, BC, CB); a pair with an invalid
    verdict is none of them. Position consistency = consistent / (consistent + primacy +
    recency), with its Clopper-Pearson interval. Preference fairness = (raw - S_min) / (S_max -
    S_min) * 2 - 1 with raw = recency * recency / (primacy + recency) - primacy * primacy /
    (primacy + recency) (0 without inconsistent pairs) and S_max = -S_min = n, every pair judged
    in both orders (invalid ones too); it equals (recency - primacy) / n, in [-1, 1]: below 0
    the answer shown first is preferred, above 0 the second."""
    consistent = primacy = recency = invalid = 0
    for p in pairs:
        if p.order_1 is None or p.order_2 is None:
            invalid += 1
        elif p.order_1 == p.order_2:
            consistent += 1
        elif _primacy(p):
            primacy += 1
        else:
            recency += 1
    n = len(pairs)
    inc = primacy + recency
    raw = (recency * recency - primacy * primacy) / inc if inc else 0.0
    fairness = (recency - primacy) / n if n else None  # the rescaled raw score, in closed form
    ci = proportion_ci(consistent, consistent + inc, alpha)
    return ShiMeasures(
        PositionConsistency(
            consistent=consistent, n=consistent + inc, rate=ci.estimate, ci=exact_interval(ci)
        ),
        PreferenceFairness(value=fairness, primacy=primacy, recency=recency, raw=raw, n=n, invalid=invalid),
    )


def _score(winner: str | None, side: str) -> float:
    return 1.0 if winner == side else 0.5 if winner == "TIE" else 0.0


def _ranking(rates: Mapping[str, float]) -> tuple[tuple[str, ...], ...]:
    levels = sorted(set(rates.values()), reverse=True)
    return tuple(tuple(sorted(m for m, r in rates.items() if r == v)) for v in levels)


def win_rates(pairs: Sequence[OrderPair]) -> WinRates:
    """Each model's win rate (a win 1, a TIE 1/2, a loss 0, averaged over its verdicts) over the
    pairs with a valid verdict in both orders: ``balanced`` counts both orders of every pair,
    ``order_1`` only the verdicts with A shown first, ``order_2`` only those with B shown first
    (what a run judging in that one order would have reported). ``balanced`` is the mean of the
    other two: each pair contributes one verdict to each."""
    scores: dict[str, dict[str, list[float]]] = {}
    as_a: dict[str, int] = {}
    for p in pairs:
        if p.order_1 is None or p.order_2 is None or not (p.model_a and p.model_b):
            continue
        for side, model in (("A", p.model_a), ("B", p.model_b)):
            s = scores.setdefault(model, {"1": [], "2": []})
            s["1"].append(_score(p.order_1, side))
            s["2"].append(_score(p.order_2, side))
            as_a[model] = as_a.get(model, 0) + (side == "A")
    models: dict[str, ModelWinRate] = {}
    for m in sorted(scores):
        one, two = scores[m]["1"], scores[m]["2"]
        r1, r2 = math.fsum(one) / len(one), math.fsum(two) / len(two)
        models[m] = ModelWinRate(
            pairs=len(one),
            shown_first_in_order_1=as_a[m],
            balanced=math.fsum(one + two) / (2 * len(one)),
            order_1=r1,
            order_2=r2,
            order_1_minus_order_2=r1 - r2,
        )
    ranking = {
        k: _ranking({m: getattr(v, k) for m, v in models.items()}) for k in ("balanced", "order_1", "order_2")
    }
    return WinRates(
        scoring="win 1, TIE 1/2, loss 0, averaged over the model's verdicts",
        pairs=sum(1 for p in pairs if p.order_1 is not None and p.order_2 is not None),
        models=models,
        ranking=ranking,
        ranking_changes=ranking["order_1"] != ranking["balanced"]
        or ranking["order_2"] != ranking["balanced"],
    )
