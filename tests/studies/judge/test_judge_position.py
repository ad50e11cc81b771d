"""What position bias does to a judge's numbers (lmaudit.studies.judge.position): the
randomization test against scipy.stats.binomtest and a planted bias of known size, Shi et al.'s
position consistency and preference fairness against a transcription of their displayed-label
counting, and balanced-position win rates against closed forms."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from lmaudit.studies.judge.order_swap import OrderPair
from lmaudit.studies.judge.position import (
    SingleVerdict,
    consistency_fairness,
    randomized,
    single_verdicts,
    win_rates,
)

LABELS = ("A", "B", "TIE", None)


def pair(o1, o2, a="a", b="b") -> OrderPair:
    return OrderPair("i", 0, o1, o2, "j/p", " vs ".join(sorted((a, b))), None, a, b)


def test_randomized_counts_p_and_interval_match_scipy() -> None:
    rng = np.random.default_rng(7)
    verdicts = [
        SingleVerdict(int(o), w, "j")
        for o, w in zip(
            rng.integers(1, 3, 300), rng.choice(np.array(["A", "B", "TIE", "X"]), 300), strict=True
        )
    ]
    verdicts = [SingleVerdict(v.order, None if v.winner == "X" else v.winner, "j") for v in verdicts]
    got = randomized(verdicts, 0.1)
    decisive = [v for v in verdicts if v.winner in ("A", "B")]
    first = sum((v.order == 1) == (v.winner == "A") for v in decisive)
    assert (got.decisive, got.first_wins) == (len(decisive), first)
    assert got.ties + got.invalid + got.decisive == got.verdicts == 300
    want = stats.binomtest(first, len(decisive), 0.5)
    ci = want.proportion_ci(confidence_level=0.9, method="exact")
    assert got.p_value == pytest.approx(want.pvalue, rel=1e-12)
    assert (got.ci.low, got.ci.high) == pytest.approx((ci.low, ci.high), rel=1e-9)


@pytest.mark.parametrize("bias", [0.0, 0.8])
def test_randomized_order_recovers_a_planted_position_bias(bias) -> None:
    """Answers of quality +-1 shown in a random order; the judge picks the first-shown answer with
    probability sigmoid(q_first - q_second + bias). Closed form of the first-position win rate:
    (sigmoid(2 + bias) + sigmoid(-2 + bias)) / 2, whatever the answers' qualities, because the
    order is random. The 99% interval over 4000 pairs (seed 11) covers it."""
    rng = np.random.default_rng(11)
    n = 4000
    model_first = rng.random(n) < 0.5  # the model (quality +1) shown first, else the reference (-1)
    d = np.where(model_first, 2.0, -2.0)
    first_won = rng.random(n) < 1 / (1 + np.exp(-(d + bias)))
    # A = the model; order 1 shows A first
    verdicts = [
        SingleVerdict(1 if mf else 2, ("A" if mf else "B") if fw else ("B" if mf else "A"), "j")
        for mf, fw in zip(model_first, first_won, strict=True)
    ]
    got = randomized(verdicts, 0.01)
    closed = (1 / (1 + math.exp(-(2 + bias))) + 1 / (1 + math.exp(-(-2 + bias)))) / 2
    assert got.ci.low <= closed <= got.ci.high
    assert abs(got.rate - closed) < 0.03  # 4 binomial standard errors at n = 4000
    if bias == 0.0:
        assert closed == pytest.approx(0.5, abs=1e-15) and got.p_value > 0.01
    else:
        assert got.p_value < 1e-10


def test_single_verdicts_are_the_pairs_judged_in_one_order() -> None:
    def row(item, swap, winner):
        return {
            "kind": "judgment",
            "item": item,
            "replicate": 0,
            "final": True,
            "swap": swap,
            "valid": winner is not None,
            "winner_original": winner,
            "pair": {"judge_prompt": "j"},
        }

    rows = [row("both", False, "A"), row("both", True, "B"), row("one", True, "B"), row("two", False, None)]
    assert single_verdicts(rows) == [SingleVerdict(2, "B", "j"), SingleVerdict(1, None, "j")]


def _shown(o1, o2) -> str:
    """Shi et al.'s choice pair: each order's verdict as displayed (A shown first, C a TIE, N none)."""
    first = {"A": "A", "B": "B", "TIE": "C", None: "N"}[o1]
    second = {"A": "B", "B": "A", "TIE": "C", None: "N"}[o2]  # order 2 shows B as A
    return first + second


def test_consistency_and_fairness_match_the_authors_counting() -> None:
    """Every pair of verdicts, with multiplicities from a seeded draw, against Shi et al.'s
    counting of displayed choice pairs (AA AC CA primacy, BB BC CB recency, AB BA CC consistent)
    and their rescaling of the raw score to [-1, 1] with S_min = -n, S_max = n."""
    rng = np.random.default_rng(3)
    pairs = [
        pair(o1, o2) for o1, o2 in itertools.product(LABELS, LABELS) for _ in range(int(rng.integers(0, 6)))
    ]
    got = consistency_fairness(pairs, 0.05)
    shown = [_shown(p.order_1, p.order_2) for p in pairs]
    primacy = sum(s in ("AA", "AC", "CA") for s in shown)
    recency = sum(s in ("BB", "BC", "CB") for s in shown)
    consistent = sum(s in ("AB", "BA", "CC") for s in shown)
    n = len(pairs)
    raw = recency * recency / (primacy + recency) - primacy * primacy / (primacy + recency)
    pf = (raw - (-n)) / (n - (-n)) * 2 - 1
    assert got.position_consistency.consistent == consistent
    assert got.position_consistency.rate == pytest.approx(consistent / (consistent + primacy + recency))
    assert (got.preference_fairness.primacy, got.preference_fairness.recency) == (
        primacy,
        recency,
    )
    assert got.preference_fairness.value == pytest.approx(pf, abs=1e-12)
    assert got.preference_fairness.value == pytest.approx((recency - primacy) / n, abs=1e-12)
    assert got.preference_fairness.invalid == sum("N" in s for s in shown)


def test_fairness_is_minus_one_for_a_judge_that_always_picks_the_first_shown() -> None:
    got = consistency_fairness([pair("A", "B")] * 5, 0.05)
    assert got.preference_fairness.value == -1.0 and got.position_consistency.rate == 0.0
    none = consistency_fairness([], 0.05)
    assert none.preference_fairness.value is None and none.position_consistency.rate is None


def test_win_rates_on_a_hand_built_case() -> None:
    pairs = [
        pair("A", "A", "x", "y"),  # x wins both orders
        pair("A", "B", "x", "y"),  # first shown wins: x then y
        pair("TIE", "B", "y", "z"),  # order 1 TIE, order 2 z (B) wins
        pair(None, "A", "x", "z"),  # invalid: left out
    ]
    got = win_rates(pairs)
    assert got.pairs == 3
    x, y, z = (got.models[m] for m in ("x", "y", "z"))
    assert (x.pairs, x.order_1, x.order_2, x.balanced) == (2, 1.0, 0.5, 0.75)
    assert (y.pairs, y.order_1, y.order_2, y.balanced) == (3, 0.5 / 3, 1 / 3, 0.25)
    assert (z.pairs, z.order_1, z.order_2, z.balanced) == (1, 0.5, 1.0, 0.75)
    assert (x.shown_first_in_order_1, y.shown_first_in_order_1, z.shown_first_in_order_1) == (
        2,
        1,
        0,
    )
    for m in got.models.values():
        assert m.balanced == pytest.approx((m.order_1 + m.order_2) / 2, abs=1e-15)
    assert got.ranking["balanced"] == (("x", "z"), ("y",)) and got.ranking_changes


def test_a_judge_that_always_picks_the_first_shown_is_balanced_out() -> None:
    """Whatever the models, a pure first-position judge gives every model 1/2 balanced; a single
    order gives each model the share of its pairs in which it was shown first in that order."""
    models = ["m1", "m2", "m3", "m4"]
    pairs = [pair("A", "B", a, b) for a, b in itertools.combinations(models, 2)]
    got = win_rates(pairs)
    for i, m in enumerate(models):
        w = got.models[m]
        assert w.balanced == 0.5
        assert w.order_1 == pytest.approx((len(models) - 1 - i) / (len(models) - 1))
        assert w.order_2 == pytest.approx(i / (len(models) - 1))
    assert got.ranking["balanced"] == (tuple(models),) and got.ranking["order_1"] == tuple(
        (m,) for m in models
    )
