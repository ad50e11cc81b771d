"""Generic pieces of permutation and Monte Carlo tests (no study imports).

* :func:`monte_carlo_pvalue`: the valid Monte Carlo p-value ``(1 + #{T* >= T}) / (1 + B)``
  (one-sided, "greater"); exact-valid for any ``B`` when the ``B`` null draws and the
  observed statistic are exchangeable under the null.
* :func:`upper_critical_value`: the ``1 - alpha`` quantile of a null sample, taken as an
  observed null value (inverted CDF), so that ``T > c`` rejects at most an ``alpha`` share.
* :func:`poisson_binomial_sf`: ``P(X >= k)`` for a sum of independent Bernoulli(``p_i``),
  exactly, by convolution (used for counts of rare events under a permutation null).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["monte_carlo_pvalue", "poisson_binomial_sf", "upper_critical_value"]


def monte_carlo_pvalue(null: ArrayLike, observed: float, *, tol: float = 0.0) -> float:
    """One-sided Monte Carlo p-value: ``(1 + #{null >= observed - tol}) / (1 + len(null))``.

    ``tol`` absorbs floating-point noise when the statistic is a float sum of rationals;
    integer statistics need none.
    """
    t = np.asarray(null, dtype=np.float64).reshape(-1)
    return float((1 + np.count_nonzero(t >= observed - tol)) / (1 + t.size))


def upper_critical_value(null: ArrayLike, alpha: float) -> float:
    """The ``1 - alpha`` quantile of ``null`` by the inverted empirical CDF (an observed value)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    t = np.asarray(null, dtype=np.float64).reshape(-1)
    if t.size == 0:
        raise ValueError("null sample is empty")
    return float(np.quantile(t, 1.0 - alpha, method="inverted_cdf"))


def poisson_binomial_sf(probs: ArrayLike, k: int) -> float:
    """``P(X >= k)`` for ``X = sum_i Bernoulli(probs[i])`` (independent), by exact convolution."""
    p = np.clip(np.asarray(probs, dtype=np.float64).reshape(-1), 0.0, 1.0)
    if k <= 0:
        return 1.0
    if k > p.size:
        return 0.0
    pmf = np.zeros(p.size + 1, dtype=np.float64)
    pmf[0] = 1.0
    for i, pi in enumerate(p):
        # add one Bernoulli: pmf'[j] = pmf[j] (1 - p) + pmf[j - 1] p, over the support so far
        head = pmf[: i + 2].copy()
        pmf[1 : i + 2] = head[1:] * (1.0 - pi) + head[:-1] * pi
        pmf[0] = head[0] * (1.0 - pi)
    return float(min(1.0, max(0.0, pmf[k:].sum())))
