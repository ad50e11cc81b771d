"""Smith's S (hand-worked), prompt width, persona lift, echo rate, signal-to-chance and the
codebook permutation test, on small cases whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lmaudit.stats.rbo import rbo_ext
from lmaudit.stats.salience import (
    codebook_permutation_test,
    echo_rate,
    persona_lift,
    prompt_width,
    signal_to_chance,
    smiths_s,
)


def test_smiths_s_hand_worked() -> None:
    # Three lists, N = 3:  L1 = a b c (L=3), L2 = b a (L=2), L3 = c (L=1).
    # S_a = (1/3) [ (3-1+1)/3 + (2-2+1)/2 ]  = (1/3) (1   + 1/2) = 1/2
    # S_b = (1/3) [ (3-2+1)/3 + (2-1+1)/2 ]  = (1/3) (2/3 + 1)   = 5/9
    # S_c = (1/3) [ (3-3+1)/3 + (1-1+1)/1 ]  = (1/3) (1/3 + 1)   = 4/9
    sal = smiths_s([["a", "b", "c"], ["b", "a"], ["c"]])
    assert sal.items == ("b", "a", "c")
    assert sal.s == pytest.approx((5 / 9, 1 / 2, 4 / 9), abs=1e-15)
    assert sal.frequency == (2, 2, 2) and sal.n_lists == 3
    # an empty list still counts as a respondent: N = 4
    assert smiths_s([["a"], []]).as_dict() == {"a": 0.5}
    # a repeat counts once at its first rank; the list is re-ranked without it (L = 2)
    assert smiths_s([["a", "b", "a"]]).as_dict() == {"a": 1.0, "b": 0.5}
    # a ranking in salience order
    assert smiths_s([["x", "y"], ["y", "x"], ["y"]]).ranking() == ["y", "x"]


def test_prompt_width() -> None:
    assert prompt_width(0, 0.1) == 0.0
    assert prompt_width(10, 0.0) == pytest.approx(math.log(11))
    assert prompt_width(10, 0.35) == 0.0 and prompt_width(10, 0.9) == 0.0
    assert prompt_width(19, 0.175) == pytest.approx(math.log(20) * 0.5)
    with pytest.raises(ValueError):
        prompt_width(5, 1.5)


def test_persona_lift() -> None:
    lift = persona_lift(0.1, 0.254)
    assert lift.absolute == pytest.approx(0.154) and lift.relative == pytest.approx(2.54)
    assert persona_lift(0.0, 0.1).relative == math.inf
    assert math.isnan(persona_lift(0.0, 0.0).relative)


def test_echo_rate() -> None:
    vocab = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    angle = math.acos(0.85)  # cosine distance 0.15: an echo; 0.25: not
    far = math.acos(0.75)
    concepts = np.array(
        [
            [math.cos(angle), 0.0, math.sin(angle)],
            [0.0, 2 * math.cos(far), 2 * math.sin(far)],  # scale does not matter
            [0.0, 0.0, 1.0],
            [0.0, 3.0, 0.0],
        ]
    )
    res = echo_rate(concepts, vocab)
    assert res.echo == (True, False, False, True)
    assert res.rate == 0.5 and res.n_echo == 2 and res.n == 4
    assert res.nearest_distance[0] == pytest.approx(0.15) and res.nearest_distance[1] == pytest.approx(0.25)
    assert echo_rate(concepts, vocab, threshold=0.3).n_echo == 3
    assert echo_rate(concepts, np.zeros((0, 3))).rate == 0.0
    assert math.isnan(echo_rate(np.zeros((0, 3)), vocab).rate)
    with pytest.raises(ValueError, match="zero row"):
        echo_rate(np.zeros((1, 3)), vocab)


def test_signal_to_chance() -> None:
    # nine models agreeing on the top of a 20-item list drawn from a 60-concept pool
    rng = np.random.default_rng(0)
    shared = [f"c{i}" for i in range(10)]
    lists = [shared + [f"m{m}-{k}" for k in range(10)] for m in range(9)]
    res = signal_to_chance(lists, rng=np.random.default_rng(1), n_shuffles=200)
    assert res.n_pairs == 36 and len(res.null) == 200
    assert res.observed == pytest.approx(rbo_ext(lists[0], lists[1]))
    assert res.ratio > 2 and res.p_value == pytest.approx(1 / 201)
    # lists drawn independently from one pool: ratio near 1
    pool = [f"c{i}" for i in range(30)]
    lists = [list(rng.permutation(pool)[:15]) for _ in range(9)]
    res = signal_to_chance(lists, rng=np.random.default_rng(2), n_shuffles=300)
    assert 0.8 < res.ratio < 1.25 and res.p_value > 0.01
    again = signal_to_chance(lists, rng=np.random.default_rng(2), n_shuffles=300)
    assert again.null == res.null


def test_codebook_permutation_test() -> None:
    rng = np.random.default_rng(3)
    models = [m for m in "ABC" for _ in range(60)]
    # planted association: each model draws mostly from its own two clusters
    own = {"A": [0, 1], "B": [2, 3], "C": [4, 5]}
    clusters = [int(rng.choice(own[m])) if rng.random() < 0.8 else int(rng.integers(6)) for m in models]
    res = codebook_permutation_test(models, clusters, rng=np.random.default_rng(4), n_permutations=500)
    assert res.p_value == pytest.approx(1 / 501) and res.cramers_v > 0.5
    assert sum(map(sum, res.table)) == 180 and [sum(r) for r in res.table] == [60, 60, 60]
    # no association: clusters independent of the model
    clusters = [int(x) for x in rng.integers(6, size=180)]
    res = codebook_permutation_test(models, clusters, rng=np.random.default_rng(5), n_permutations=500)
    assert res.p_value > 0.01
    # the chi-square matches scipy's on the observed table
    from scipy.stats import chi2_contingency

    assert res.statistic == pytest.approx(
        chi2_contingency(np.array(res.table), correction=False)[0], rel=1e-12
    )
    with pytest.raises(ValueError, match="two models"):
        codebook_permutation_test(["A"] * 3, [0, 1, 2], rng=rng)


def test_sign_flip_test_is_exact_against_enumeration_and_closed_forms():
    import itertools

    from lmaudit.stats.permutation import sign_flip_test

    rng = np.random.default_rng(11)
    for n in (1, 3, 6, 10):
        d = rng.integers(-3, 4, size=n)
        obs, p = sign_flip_test(d)
        sums = [int(np.dot(d, s)) for s in itertools.product((-1, 1), repeat=n)]
        assert obs == int(d.sum())
        assert p == sum(abs(x) >= abs(obs) for x in sums) / 2**n
    # closed forms: n equal positive differences -> only the two all-equal patterns reach |n|
    assert sign_flip_test([1] * 12)[1] == 2 / 2**12
    assert sign_flip_test([0, 0, 0])[1] == 1.0
    with pytest.raises(ValueError, match="integer"):
        sign_flip_test([0.5, 1.0])


def test_exact_salience_ties_are_tie_groups() -> None:
    # x: (5 + 1)/5 / 2, y: (4 + 2)/5 / 2: both exactly 3/5 (a float sum gives y 0.6000000000000001)
    sal = smiths_s([["x", "y", "a", "b", "c"], ["d", "e", "f", "y", "x"]])
    assert sal.s[:2] == (0.6, 0.6) and sal.items[:2] == ("x", "y")  # tie rule: more lists, then first seen
    assert sal.tied_ranking() == [frozenset("xy"), "d", "e", frozenset("af"), "b", "c"]
    # two members whose S are equal concept by concept agree fully once ties are ties
    m1 = smiths_s([["a", "b"], ["c", "d"]]).tied_ranking()
    m2 = smiths_s([["c", "d"], ["a", "b"]]).tied_ranking()
    assert m1 == m2 == [frozenset("ac"), frozenset("bd")]
    assert rbo_ext(m1, m2) == pytest.approx(1.0, abs=1e-15)
    res = signal_to_chance([m1, m2, ["e", "a"]], rng=np.random.default_rng(0), n_shuffles=50)
    want = (1.0 + rbo_ext(m1, ["e", "a"]) + rbo_ext(m2, ["e", "a"])) / 3
    assert res.observed == pytest.approx(want, abs=1e-12)
