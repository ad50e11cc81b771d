"""The order-swap analysis: counts on hand-built pairs, exact intervals and p-values against
scipy.stats.binomtest, a planted first-position bias recovered within its interval, an
unbiased judge not rejected, the rows it reads, its metrics and its figure."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from lmaudit.studies.judge.order_swap import COUNT_KEYS, OrderPair, block, classify, counts, order_swap
from lmaudit.studies.judge.report.figures import order_swap_svg
from lmaudit.studies.judge.report.order_swap import metrics, table
from svg_checks import texts, texts_off_canvas

LABELS = ("A", "B", "TIE", None)


def pair(o1, o2, *, prompt="j/p", models="a vs b", turn=1, item="i", rep=0) -> OrderPair:
    return OrderPair(item, rep, o1, o2, prompt, models, turn)


def row(cond, item, winner, *, rep=0, turn=1, prompt="gpt-4/pair-v2", models=("m1", "m2")) -> dict:
    return {
        "kind": "judgment",
        "condition": cond,
        "item": item,
        "replicate": rep,
        "final": True,
        "swap": cond == "SWAP",
        "valid": winner is not None,
        "winner_original": winner,
        "pair": {"judge_prompt": prompt, "models": {"A": models[0], "B": models[1]}, "turn": turn},
    }


@pytest.mark.parametrize(("o1", "o2"), list(itertools.product(LABELS, LABELS)))
def test_every_pair_of_verdicts_has_one_class(o1, o2) -> None:
    want = (
        "invalid"
        if None in (o1, o2)
        else "consistent"
        if o1 == o2
        else "one_tie"
        if "TIE" in (o1, o2)
        else {("A", "B"): "first_both", ("B", "A"): "second_both"}[(o1, o2)]
    )
    assert classify(o1, o2) == want


def test_counts_and_per_verdict_wins_on_a_hand_built_case() -> None:
    # A then B: A shown first in order 1 and B shown first in order 2 both won -> first_both
    pairs = [
        pair("A", "A"),  # consistent: 1 first win (order 1), 1 second win (order 2)
        pair("TIE", "TIE"),  # consistent, no decisive verdict
        pair("A", "B"),  # first_both: 2 first wins
        pair("A", "B"),
        pair("B", "A"),  # second_both: 2 second wins
        pair("A", "TIE"),  # one_tie: 1 first win
        pair("TIE", "A"),  # one_tie: 1 second win (A is shown second in order 2)
        pair(None, "A"),  # invalid: not counted as verdicts
        pair("B", None),
    ]
    c = counts(pairs)
    assert list(c.to_json()) == list(COUNT_KEYS)
    assert c.to_json() == {
        "n": 9,
        "consistent": 2,
        "first_both": 2,
        "second_both": 1,
        "one_tie": 2,
        "invalid": 2,
    }
    assert c.n == sum(getattr(c, k) for k in COUNT_KEYS[1:])
    b = block(pairs, 0.05)
    assert b.flipped.first_both == 2 and b.flipped.n == 3
    assert b.per_verdict.first == 1 + 4 + 1 and b.per_verdict.second == 1 + 2 + 1
    assert b.per_verdict.n == 10 and b.per_verdict.rate == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("k", "n", "alpha"), [(0, 5, 0.05), (3, 7, 0.05), (7, 7, 0.1), (52, 100, 0.05), (526, 1000, 0.01)]
)
def test_interval_and_p_match_scipy_binomtest(k, n, alpha) -> None:
    pairs = [pair("A", "B")] * k + [pair("B", "A")] * (n - k)
    got = block(pairs, alpha).flipped
    ref = stats.binomtest(k, n, 0.5)
    ci = ref.proportion_ci(confidence_level=1 - alpha, method="exact")
    assert got.ci.low == pytest.approx(ci.low, abs=1e-12)
    assert got.ci.high == pytest.approx(ci.high, abs=1e-12)
    assert got.p == pytest.approx(ref.pvalue, rel=1e-12)
    assert got.rate == pytest.approx(k / n)


def test_no_flipped_pair_gives_no_rate_and_p_one() -> None:
    b = block([pair("A", "A"), pair("TIE", "TIE")], 0.05)
    assert b.flipped.n == 0 and b.flipped.rate is None and b.flipped.p == 1.0
    assert (b.flipped.ci.low, b.flipped.ci.high) == (0.0, 1.0)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _simulate(bias: float, n_pairs: int, seed: int) -> tuple[list[OrderPair], float, float]:
    """A judge whose first-shown answer gains ``bias`` logits: P(first wins) = sigmoid(bias + d),
    d the first-shown answer's quality edge, from four equally likely values. Returns the pairs
    and the true flipped-pair and per-verdict first-position win probabilities."""
    rng = np.random.default_rng(seed)
    edges = (-1.0, -0.3, 0.3, 1.0)  # model_1's quality edge over model_2
    pairs = []
    for i in range(n_pairs):
        d = edges[int(rng.integers(len(edges)))]
        # order 1: A (model_1) first, edge d; order 2: B first, edge -d
        o1 = "A" if rng.random() < _sigmoid(bias + d) else "B"
        o2 = "B" if rng.random() < _sigmoid(bias - d) else "A"
        pairs.append(pair(o1, o2, item=f"p{i}"))
    fb = sum(_sigmoid(bias + d) * _sigmoid(bias - d) for d in edges) / len(edges)
    sb = sum((1 - _sigmoid(bias + d)) * (1 - _sigmoid(bias - d)) for d in edges) / len(edges)
    per_verdict = sum(_sigmoid(bias + d) + _sigmoid(bias - d) for d in edges) / (2 * len(edges))
    return pairs, fb / (fb + sb), per_verdict


def test_a_planted_first_position_bias_is_recovered_within_its_interval() -> None:
    pairs, true_flipped, true_verdict = _simulate(bias=0.6, n_pairs=600, seed=1)
    b = block(pairs, 0.05)
    f, v = b.flipped, b.per_verdict
    assert f.ci.low <= true_flipped <= f.ci.high
    assert v.ci.low <= true_verdict <= v.ci.high
    assert f.p < 1e-6 and v.p < 1e-6  # the bias is found
    assert true_flipped > true_verdict > 0.5  # the flipped pairs concentrate the bias


def test_an_unbiased_judge_is_not_rejected() -> None:
    pairs, true_flipped, true_verdict = _simulate(bias=0.0, n_pairs=600, seed=1)
    assert true_flipped == pytest.approx(0.5) and true_verdict == pytest.approx(0.5)
    b = block(pairs, 0.05)
    assert b.flipped.p > 0.05 and b.per_verdict.p > 0.05
    assert b.flipped.ci.low <= 0.5 <= b.flipped.ci.high


def test_the_flipped_interval_covers_the_truth_at_its_level() -> None:
    """Exact (Clopper-Pearson) intervals cover at least their nominal 95%: over 100 seeds,
    allowing binomial noise (P(X <= 88 | n=100, p=0.95) < 0.005)."""
    covered = 0
    for seed in range(100):
        pairs, true_flipped, _ = _simulate(bias=0.6, n_pairs=300, seed=seed)
        f = block(pairs, 0.05).flipped
        covered += f.ci.low <= true_flipped <= f.ci.high
    assert covered >= 89


def test_rows_are_paired_by_item_and_replicate_and_grouped() -> None:
    rows = [
        row("P0", "x", "A"),
        row("SWAP", "x", "B"),  # first_both, turn 1
        row("P0", "x", "A", rep=1),
        row("SWAP", "x", "A", rep=1),  # consistent (replicate 1 pairs with replicate 1)
        row("P0", "y", None, turn=2, models=("m3", "m1")),
        row("SWAP", "y", "A", turn=2, models=("m3", "m1")),  # invalid
        row("P0", "z", "B", turn=10),  # order 1 only: not a pair
        {**row("P0", "w", "A"), "final": False},  # a failed attempt: not read
        {"kind": "judgment", "condition": "P0", "item": "v", "replicate": 0, "final": True, "swap": False},
    ]
    out = order_swap(rows, 0.05)
    assert out is not None
    assert out.counts.to_json() == {
        "n": 3,
        "consistent": 1,
        "first_both": 1,
        "second_both": 0,
        "one_tie": 0,
        "invalid": 1,
    }
    assert out.unpaired.to_json() == {"order_1_only": 1, "order_2_only": 0}
    assert list(out.by_turn) == ["1", "2"]
    assert list(out.by_model_pair) == ["m1 vs m2", "m1 vs m3"]  # names sorted, either orientation
    assert out.by_model_pair["m1 vs m3"].counts.invalid == 1
    assert list(out.by_judge_prompt) == ["gpt-4/pair-v2"]


def test_rows_without_pairs_have_no_section() -> None:
    rows = [{k: v for k, v in row(c, "x", "A").items() if k != "pair"} for c in ("P0", "SWAP")]
    assert order_swap(rows, 0.05) is None


def test_metrics_name_every_count_and_both_readings() -> None:
    rows = [
        row("P0", "x", "A"),
        row("SWAP", "x", "B"),
        row("P0", "y", "B", turn=2),
        row("SWAP", "y", "A", turn=2),
    ]
    section = order_swap(rows, 0.05)
    assert section is not None
    m = metrics(section)
    for k in COUNT_KEYS:
        assert f"order_swap.{k}" in m
    assert m["order_swap.flipped_first_rate"] == 0.5 and m["order_swap.first_rate"] == 0.5
    assert m["order_swap.turn.1.first_both"] == 1 and m["order_swap.turn.2.second_both"] == 1
    assert "order_swap.prompt.gpt-4/pair-v2.flipped_first_p" in m
    assert "order_swap.pair.m1 vs m2.n" in m


def test_figure_rows_counts_and_bytes() -> None:
    rows = [
        row("P0", "x", "A"),
        row("SWAP", "x", "B"),
        row("P0", "y", "B", turn=2),
        row("SWAP", "y", "B", turn=2),
    ]
    section = order_swap(rows, 0.05)
    assert section is not None
    shown = [r for r in table(section) if r.group != "model pair"]
    svg = order_swap_svg(shown, 0.05)
    assert svg == order_swap_svg(shown, 0.05)
    got = texts(svg)
    assert {
        "all pairs",
        "judge prompt: gpt-4/pair-v2",
        "turn: 1",
        "turn: 2",
        "1/1 · 3/4",
        "0/0 · 1/2",
    } <= set(got)
    assert texts_off_canvas(svg) == []
    ties = order_swap([row("P0", "x", "TIE"), row("SWAP", "x", "TIE")], 0.05)
    assert ties is not None
    empty = table(ties)
    assert order_swap_svg(empty, 0.05) == ""
