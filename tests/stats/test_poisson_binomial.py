"""The Poisson-binomial upper tail, both computations: against enumeration, an independent
implementation (``scipy.stats.poisson_binom``'s pmf, summed from the far end), the previous
implementation (the recursion), the binomial closed form (``scipy.stats.binom.sf``) up to
``10^6`` Bernoullis, and a bound on the interpreted work (no Python step per Bernoulli)."""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pytest
from scipy.stats import binom, poisson_binom

from lmaudit.stats import poisson_binomial as pb
from lmaudit.stats.permutation import poisson_binomial_sf
from lmaudit.stats.poisson_binomial import DIRECT_MAX, FFT_RTOL


@pytest.fixture(params=["recursion", "fft"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Either computation at any size: ``fft`` sends every input past the recursion."""
    if request.param == "fft":
        monkeypatch.setattr(pb, "DIRECT_MAX", 0)
    return str(request.param)


def tails(p: np.ndarray) -> np.ndarray:
    """``P(X >= k)`` for every ``k``, from scipy's pmf summed from the far end (small terms first)."""
    pmf = poisson_binom.pmf(np.arange(p.size + 1), p)
    return np.append(np.cumsum(pmf[::-1])[::-1], 0.0)


def test_both_paths_match_enumeration(path: str) -> None:
    """Every ``k`` (and beyond the support) for small ``n``, certain outcomes included: 1e-15
    absolute, ``FFT_RTOL`` relative."""
    rng = np.random.default_rng(46)
    for n in range(1, 9):
        p = rng.random(n)
        p[rng.random(n) < 0.2] = 0.0
        p[rng.random(n) < 0.2] = 1.0
        for k in range(-1, n + 2):
            brute = sum(
                math.prod(pi if b else 1 - pi for pi, b in zip(p, bits, strict=True))
                for bits in itertools.product([0, 1], repeat=n)
                if sum(bits) >= k
            )
            assert poisson_binomial_sf(p, k) == pytest.approx(brute, rel=FFT_RTOL, abs=1e-15), (n, k)


@pytest.mark.parametrize("scale", [0.5, 0.05, 1e-4])
def test_fft_path_matches_scipy_pmf_and_the_recursion_deep_in_the_tail(scale: float) -> None:
    """3,000 Bernoullis (past ``DIRECT_MAX``): from the mean out to tails near 1e-300, within
    ``FFT_RTOL`` relative of scipy's pmf and of the recursion (the previous implementation)."""
    rng = np.random.default_rng(int(1 / scale))
    p = rng.random(3000) * scale
    assert p.size > DIRECT_MAX
    ref = tails(p)
    mu, sd = p.sum(), math.sqrt((p * (1 - p)).sum())
    ks = {1, int(mu), int(mu) + 1, *(int(mu + z * sd) + 1 for z in (3, 10, 40, 100))}
    checked = 0
    for k in sorted(ks):
        if ref[k] <= 1e-300:
            continue
        got = poisson_binomial_sf(p, k)
        assert got == pytest.approx(ref[k], rel=FFT_RTOL), k
        assert got == pytest.approx(pb._sf_recursion(p, k), rel=FFT_RTOL), k
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize(
    ("n", "prob"), [(10**4, 0.3), (10**5, 1e-3), (10**5, 0.5), (10**5, 1e-6), (10**6, 0.3)]
)
def test_identical_probabilities_give_the_binomial_tail(n: int, prob: float) -> None:
    """Closed form: ``n`` equal ``p`` make ``Binomial(n, p)``; at the mean and 5, 30, 200
    standard deviations out (tails to below 1e-150), within ``FFT_RTOL`` relative."""
    mu, sd = n * prob, math.sqrt(n * prob * (1 - prob))
    for z in (0, 5, 30, 200):
        k = int(mu + z * sd) + 1
        expect = float(binom.sf(k - 1, n, prob))
        if k > n or expect < 1e-300:
            continue
        assert poisson_binomial_sf(np.full(n, prob), k) == pytest.approx(expect, rel=FFT_RTOL), k


def test_certain_outcomes_at_scale() -> None:
    """Past ``DIRECT_MAX``: certain successes shift ``k``, certain failures add nothing, and the
    uncertain rest (here under ``DIRECT_MAX``) goes to the recursion, exactly as before."""
    rng = np.random.default_rng(7)
    p = np.concatenate([rng.random(500) * 0.1, np.ones(1000), np.zeros(3000)])
    rng.shuffle(p)
    uncertain = p[(p > 0) & (p < 1)]
    for k in (1001, 1040, 1100, 1500):
        assert poisson_binomial_sf(p, k) == pb._sf_recursion(uncertain, k - 1000), k
    assert poisson_binomial_sf(p, 1000) == 1.0
    assert poisson_binomial_sf(p, 1501) == 0.0
    every = np.full(5000, 0.9)  # k = n: only the product of the probabilities
    assert poisson_binomial_sf(every, 5000) == pytest.approx(0.9**5000, rel=1e-12)


def interpreted_lines(fn: Callable[[], Any]) -> int:
    """Python lines run inside ``lmaudit.stats`` while ``fn`` runs (numpy and scipy not counted)."""
    root = str(Path(pb.__file__).parent)
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += event == "line"
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(root) else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(previous)
    return count


def test_no_interpreted_step_per_bernoulli() -> None:
    """Doubling ``n`` (8,192 to 16,384) adds at most a few dozen interpreted lines (the
    tilt's root search, one more FFT level), where one Bernoulli at a time adds ``n``; the
    work left is numpy's and scipy's FFT, ``O(n log^2 n)``. Counts lines, not seconds."""
    rng = np.random.default_rng(11)
    counts = []
    for n in (8192, 16384):
        p = rng.random(n) * 0.01
        k = int(p.sum() + 10 * math.sqrt(p.sum())) + 1
        counts.append(interpreted_lines(lambda p=p, k=k: poisson_binomial_sf(p, k)))
    assert counts[1] - counts[0] <= 100, counts
    assert counts[1] < 16384 // 16, counts


def test_mean_within_rounding_of_k_needs_no_tilt() -> None:
    """4,096 equal ``p`` just under 1/4,096: the mean is below ``k = 1``, but through logit and
    expit it rounds to 1; the tail is still the binomial's, within ``FFT_RTOL``."""
    x = float(np.nextafter(1 / 4096, 0))
    p = np.full(4096, x)
    assert p.sum() < 1
    assert poisson_binomial_sf(p, 1) == pytest.approx(float(binom.sf(0, 4096, x)), rel=FFT_RTOL)
