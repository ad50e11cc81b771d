"""Per-sequence statistics against exhaustive enumeration and an independent plain-Python version."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmaudit.stats.multiplicity import holm
from lmaudit.stats.permutation import monte_carlo_pvalue, poisson_binomial_sf, upper_critical_value
from lmaudit.studies.draws.sequences import encode, sequence_stats

SMALL = [
    "AAB",
    "ABAB",
    "AABB",
    "AAABB",
    "ABCA",
    "AABBC",
    "AAAAB",
    "ABCDEF",
    "AABBCC",
    "AAABBBC",
    "A",
    "AB",
    "AAAA",
]


def _repeats(s: str) -> int:
    return sum(a == b for a, b in itertools.pairwise(s))


def _drift(s: str) -> int:
    h = len(s) // 2
    first, second = Counter(s[:h]), Counter(s[h:])
    return sum((first[k] - second[k]) ** 2 for k in set(s))


@pytest.mark.parametrize("seq", SMALL)
def test_e0_is_the_exact_permutation_expectation_of_r(seq: str) -> None:
    orderings = list(itertools.permutations(seq))  # every ordering, ties counted with multiplicity
    exact = Fraction(sum(_repeats("".join(o)) for o in orderings), len(orderings))
    counts = Counter(seq)
    assert exact == Fraction(sum(c * (c - 1) for c in counts.values()), len(seq))
    stats = sequence_stats(encode([list(seq)]))
    assert stats.e0[0] == pytest.approx(float(exact), abs=1e-12)
    assert stats.repeats[0] == _repeats(seq)


@pytest.mark.parametrize("seq", SMALL)
def test_drift_expectation_and_grouped_probability_match_enumeration(seq: str) -> None:
    orderings = ["".join(o) for o in itertools.permutations(seq)]
    stats = sequence_stats(encode([list(seq)]))
    assert stats.drift_e0[0] == pytest.approx(
        float(Fraction(sum(map(_drift, orderings)), len(orderings))), abs=1e-12
    )
    k = len(set(seq))
    grouped = Fraction(sum(_runs(o) == k for o in orderings), len(orderings))  # as many runs as answers
    assert stats.grouped_prob[0] == pytest.approx(float(grouped), rel=1e-12)


def _runs(s: str) -> int:
    return len(s) - _repeats(s)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=12), min_size=1, max_size=12))
def test_statistics_match_plain_python(seqs: list[list[str]]) -> None:
    stats = sequence_stats(encode(seqs))
    for i, s in enumerate(seqs):
        text = "".join(s)
        c = Counter(text)
        assert stats.n[i] == len(s)
        assert stats.k[i] == len(c)
        assert stats.repeats[i] == _repeats(text)
        assert stats.sumsq[i] == sum(v * v for v in c.values())
        assert stats.drift[i] == _drift(text)
        assert stats.runs[i] == _runs(text)
        assert stats.informative[i] == (len(c) >= 2)
        expected_room = len(s) - 1 - sum(v * (v - 1) for v in c.values()) / len(s)
        assert stats.room[i] == pytest.approx(expected_room, abs=1e-12)
        p = math.factorial(len(c)) * math.prod(math.factorial(v) for v in c.values()) / math.factorial(len(s))
        assert stats.grouped_prob[i] == pytest.approx(p, rel=1e-10)


def test_holm_matches_hand_computation() -> None:
    res = holm([0.01, 0.04, 0.03, 0.005], alpha=0.05)
    np.testing.assert_allclose(res.adjusted, [0.03, 0.06, 0.06, 0.02], atol=1e-15)
    assert res.reject.tolist() == [True, False, False, True]
    assert holm([0.6, 0.9]).adjusted.tolist() == [1.0, 1.0]  # capped at 1
    assert holm([]).adjusted.size == 0
    with pytest.raises(ValueError, match="p-values"):
        holm([1.2])


def test_poisson_binomial_tail_matches_enumeration_and_binomial() -> None:
    p = [0.1, 0.5, 0.02, 0.7, 0.33]
    for k in range(7):
        brute = sum(
            math.prod(pi if b else 1 - pi for pi, b in zip(p, bits, strict=True))
            for bits in itertools.product([0, 1], repeat=len(p))
            if sum(bits) >= k
        )
        assert poisson_binomial_sf(p, k) == pytest.approx(brute, abs=1e-14)
    binom_sf = sum(math.comb(40, j) * 0.3**j * 0.7 ** (40 - j) for j in range(17, 41))
    assert poisson_binomial_sf([0.3] * 40, 17) == pytest.approx(binom_sf, rel=1e-10)


def test_monte_carlo_pvalue_and_critical_value() -> None:
    null = np.arange(100.0)
    assert monte_carlo_pvalue(null, 95.0) == pytest.approx(6 / 101)
    assert monte_carlo_pvalue(null, 1000.0) == pytest.approx(1 / 101)
    c = upper_critical_value(null, 0.05)
    assert np.mean(null > c) <= 0.05 and c in null
