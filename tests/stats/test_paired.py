"""The paired tests of :mod:`lmaudit.stats.paired` against brute enumeration, scipy and closed forms."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from lmaudit.stats.paired import mcnemar_exact, paired_ratio_bootstrap, sign_flip_real
from lmaudit.stats.permutation import sign_flip_test


def _brute_sign_flip(d: np.ndarray) -> float:
    """Every sign pattern, one by one."""
    obs = abs(float(d.sum()))
    hits = [abs(float(np.dot(s, d))) >= obs - 1e-12 for s in itertools.product((-1.0, 1.0), repeat=d.size)]
    return sum(hits) / len(hits)


@pytest.mark.parametrize("n", [1, 2, 5, 9, 12])
def test_sign_flip_exact_equals_brute_enumeration_and_scipy(n: int) -> None:
    rng = np.random.default_rng(100 + n)
    d = rng.normal(0.1, 0.3, size=n)
    got = sign_flip_real(d)
    assert got.method == "exact" and got.n_patterns == 2**n and got.mc_se == 0.0
    assert got.statistic == pytest.approx(d.sum(), abs=1e-12)
    assert got.p_value == pytest.approx(_brute_sign_flip(d), abs=1e-12)
    # scipy's one-sample permutation test flips signs; exact when 2^n <= n_resamples, and its
    # two-sided p (twice the smaller tail) equals P(|T| >= |t|) for this symmetric null
    if n >= 2:  # scipy needs two observations
        ref = stats.permutation_test((d,), np.sum, permutation_type="samples", n_resamples=2**n)
        assert got.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_sign_flip_one_sided_data_has_the_closed_form_two_over_two_to_the_n() -> None:
    d = -np.linspace(0.01, 0.4, 18)  # every difference negative: only the two constant patterns reach |sum|
    assert sign_flip_real(d).p_value == pytest.approx(2 / 2**18, rel=1e-12)


def test_sign_flip_monte_carlo_beyond_twenty_items_is_within_its_stated_error() -> None:
    rng = np.random.default_rng(7)
    d = rng.integers(-3, 5, size=30).astype(float)  # integers: the exact p by convolution
    _, exact = sign_flip_test(d.astype(int))
    got = sign_flip_real(d, n_resamples=50_000, seed=3)
    assert got.method == "monte carlo" and got.n_patterns == 50_000
    assert got.mc_se == pytest.approx(np.sqrt(got.p_value * (1 - got.p_value) / 50_000), rel=1e-12)
    assert abs(got.p_value - exact) <= 4 * max(got.mc_se, 1e-4)
    assert sign_flip_real(d, n_resamples=50_000, seed=3) == got  # seeded


def test_sign_flip_refuses_empty_and_non_finite() -> None:
    with pytest.raises(ValueError, match="at least one"):
        sign_flip_real([])
    with pytest.raises(ValueError, match="finite"):
        sign_flip_real([0.1, float("nan")])


def test_mcnemar_equals_scipy_binomtest_on_the_discordant_pairs() -> None:
    rng = np.random.default_rng(11)
    for n in (1, 5, 12, 40, 150):
        a = rng.random(n) < 0.4
        b = rng.random(n) < 0.6
        got = mcnemar_exact(a, b)
        n10, n01 = int(np.sum(a & ~b)), int(np.sum(~a & b))
        assert (got.only_a, got.only_b, got.both, got.n) == (n10, n01, int(np.sum(a & b)), n)
        want = 1.0 if n10 + n01 == 0 else stats.binomtest(n10, n10 + n01, 0.5).pvalue
        assert got.p_value == pytest.approx(want, abs=1e-12)


def test_mcnemar_without_discordant_pairs_is_one_and_lengths_must_match() -> None:
    assert mcnemar_exact([True, False], [True, False]).p_value == 1.0
    with pytest.raises(ValueError, match="one length"):
        mcnemar_exact([True], [True, False])


def test_paired_ratio_bootstrap_point_value_and_interval_against_a_hand_bootstrap() -> None:
    rng = np.random.default_rng(5)
    n = 40
    room_a, room_b = rng.integers(5, 20, n).astype(float), rng.integers(5, 20, n).astype(float)
    t_a, t_b = room_a * rng.uniform(0.0, 0.3, n), room_b * rng.uniform(0.2, 0.5, n)
    got = paired_ratio_bootstrap(t_a, room_a, t_b, room_b, n_resamples=20_000, seed=1)
    assert got.a == pytest.approx(t_a.sum() / room_a.sum(), rel=1e-12)
    assert got.b == pytest.approx(t_b.sum() / room_b.sum(), rel=1e-12)
    assert got.diff == pytest.approx(got.b - got.a, rel=1e-12)
    # an independent percentile bootstrap (its own stream): the ends agree within 0.01
    hand = np.random.default_rng(99)
    idx = hand.integers(0, n, size=(20_000, n))
    boot = t_b[idx].sum(1) / room_b[idx].sum(1) - t_a[idx].sum(1) / room_a[idx].sum(1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    assert got.low is not None and got.high is not None
    assert got.low == pytest.approx(lo, abs=0.01) and got.high == pytest.approx(hi, abs=0.01)
    assert got.low < got.diff < got.high
    assert paired_ratio_bootstrap(t_a, room_a, t_b, room_b, n_resamples=20_000, seed=1) == got


def test_paired_ratio_bootstrap_without_room_has_no_interval() -> None:
    got = paired_ratio_bootstrap([0.0, 0.0], [0.0, 0.0], [1.0, 0.5], [2.0, 2.0])
    assert got.a is None and got.diff is None and got.low is None and got.high is None
