"""Paired tests of two runs scored on the same items (no study imports).

* :func:`sign_flip_real`: the two-sided sign-flip test of ``sum(d)`` for real differences:
  exact (every one of the ``2^n`` sign patterns) up to ``exact_max`` items, a seeded Monte
  Carlo with its standard error beyond.
* :func:`mcnemar_exact`: the exact McNemar test of paired binary outcomes: the two-sided
  binomial test of the discordant pairs at 1/2.
* :func:`paired_ratio_bootstrap`: a percentile bootstrap interval (items resampled jointly in
  both runs) for the difference of two ratio estimators ``sum(t) / sum(room)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "BootstrapDiff",
    "McNemar",
    "SignFlip",
    "mcnemar_exact",
    "paired_ratio_bootstrap",
    "sign_flip_real",
]

#: sums within this relative distance of the observed |sum| count as ties (float noise)
TIE_RTOL = 1e-9


@dataclass(frozen=True)
class SignFlip:
    """``statistic``: sum(d); ``p_value``: two-sided; ``method``: "exact" or "monte carlo";
    ``n_patterns``: 2^n (exact) or the Monte Carlo draws; ``mc_se``: the Monte Carlo standard
    error of ``p_value`` (0 when exact)."""

    statistic: float
    p_value: float
    method: str
    n_patterns: int
    mc_se: float

    def to_json(self) -> dict[str, float | int | str]:
        return asdict(self)


def sign_flip_real(
    differences: ArrayLike, *, exact_max: int = 20, n_resamples: int = 100_000, seed: int = 0
) -> SignFlip:
    """Two-sided sign-flip test of ``sum(d)``: the share of sign patterns ``s`` with
    ``|sum(s * d)| >= |sum(d)|`` (ties within ``TIE_RTOL * sum|d|``). Exact over all ``2^n``
    patterns when ``n <= exact_max``; otherwise ``n_resamples`` patterns drawn with
    ``numpy.random.default_rng(seed)``, ``p = #/B`` with standard error ``sqrt(p (1 - p) / B)``."""
    d = np.asarray(differences, dtype=np.float64).reshape(-1)
    if d.size == 0:
        raise ValueError("sign_flip_real needs at least one difference")
    if not np.all(np.isfinite(d)):
        raise ValueError("sign_flip_real needs finite differences")
    observed = float(d.sum())
    tol = TIE_RTOL * float(np.abs(d).sum())
    if d.size <= exact_max:
        sums = np.zeros(1)
        for x in d:  # every sign pattern's sum, doubling per item
            sums = np.concatenate([sums + x, sums - x])
        p = float(np.count_nonzero(np.abs(sums) >= abs(observed) - tol)) / sums.size
        return SignFlip(observed, p, "exact", int(sums.size), 0.0)
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, n_resamples, 10_000):  # bounded memory
        m = min(10_000, n_resamples - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(m, d.size))
        extreme += int(np.count_nonzero(np.abs(signs @ d) >= abs(observed) - tol))
    p = extreme / n_resamples
    return SignFlip(observed, p, "monte carlo", n_resamples, float(np.sqrt(p * (1 - p) / n_resamples)))


@dataclass(frozen=True)
class McNemar:
    """``only_a``: pairs positive in run A only; ``only_b``: in run B only; ``p_value``: exact
    two-sided (1 when there is no discordant pair)."""

    n: int
    only_a: int
    only_b: int
    both: int
    p_value: float

    def to_json(self) -> dict[str, float | int | str]:
        return {**asdict(self), "method": "exact McNemar (binomial test of the discordant pairs at 1/2)"}


def mcnemar_exact(a: ArrayLike, b: ArrayLike) -> McNemar:
    """Exact McNemar test of paired booleans ``a[i]``, ``b[i]``:
    ``p = min(1, 2 * P(X <= min(n10, n01)))`` with ``X ~ Binomial(n10 + n01, 1/2)``."""
    from scipy.stats import binom

    x = np.asarray(a, dtype=bool).reshape(-1)
    y = np.asarray(b, dtype=bool).reshape(-1)
    if x.shape != y.shape:
        raise ValueError("mcnemar_exact needs two outcome vectors of one length")
    n10 = int(np.count_nonzero(x & ~y))
    n01 = int(np.count_nonzero(~x & y))
    k = n10 + n01
    p = 1.0 if k == 0 else min(1.0, 2.0 * float(binom.cdf(min(n10, n01), k, 0.5)))
    return McNemar(int(x.size), n10, n01, int(np.count_nonzero(x & y)), p)


@dataclass(frozen=True)
class BootstrapDiff:
    """``diff``: ratio(B) - ratio(A); ``low``/``high``: the percentile interval at ``level``
    (None when an interval cannot be formed: fewer than two items, or a zero denominator)."""

    a: float | None
    b: float | None
    diff: float | None
    low: float | None
    high: float | None
    level: float
    n_resamples: int
    seed: int

    def to_json(self) -> dict[str, float | int | str | None]:
        return {**asdict(self), "method": "percentile bootstrap, items resampled jointly in both runs"}


def _ratio(t: np.ndarray, room: np.ndarray) -> float | None:
    r = float(room.sum())
    return float(t.sum()) / r if r > 0 else None


def paired_ratio_bootstrap(
    t_a: ArrayLike,
    room_a: ArrayLike,
    t_b: ArrayLike,
    room_b: ArrayLike,
    *,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> BootstrapDiff:
    """``sum(t_b)/sum(room_b) - sum(t_a)/sum(room_a)`` with a percentile interval from
    ``scipy.stats.bootstrap`` (``paired=True``: one resampled item set for both runs)."""
    from scipy.stats import bootstrap

    arrays = [np.asarray(x, dtype=np.float64).reshape(-1) for x in (t_a, room_a, t_b, room_b)]
    ra, rb = _ratio(arrays[0], arrays[1]), _ratio(arrays[2], arrays[3])
    diff = None if ra is None or rb is None else rb - ra
    if diff is None or arrays[0].size < 2:
        return BootstrapDiff(ra, rb, diff, None, None, level, n_resamples, seed)

    def stat(ta: np.ndarray, rma: np.ndarray, tb: np.ndarray, rmb: np.ndarray, axis: int = -1) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return tb.sum(axis) / rmb.sum(axis) - ta.sum(axis) / rma.sum(axis)

    res = bootstrap(
        tuple(arrays),
        stat,
        paired=True,
        vectorized=True,
        n_resamples=n_resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    ok = np.isfinite(lo) and np.isfinite(hi)
    return BootstrapDiff(ra, rb, diff, lo if ok else None, hi if ok else None, level, n_resamples, seed)
