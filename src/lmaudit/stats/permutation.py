"""Generic pieces of permutation and Monte Carlo tests (no study imports).

* :func:`monte_carlo_pvalue`: the valid Monte Carlo p-value ``(1 + #{T* >= T}) / (1 + B)``
  (one-sided, "greater"); exact-valid for any ``B`` when the ``B`` null draws and the
  observed statistic are exchangeable under the null.
* :func:`upper_critical_value`: the ``1 - alpha`` quantile of a null sample, taken as an
  observed null value (inverted CDF), so that ``T > c`` rejects at most an ``alpha`` share.
* :func:`poisson_binomial_sf`: ``P(X >= k)`` for a sum of independent Bernoulli(``p_i``),
  exactly (used for counts of rare events under a permutation null); it lives in
  :mod:`lmaudit.stats.poisson_binomial` and is re-exported here.
* :func:`label_codes`: labels as integer codes in the order they are first seen, the codes a
  label-shuffle null permutes (so no sorting of label names decides a tie or an order).
* :func:`sign_flip_test`: the exact paired sign-flip test of integer differences (every one of
  the ``2^n`` sign patterns, counted by convolution rather than enumerated).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.stats.intervals import check_alpha
from lmaudit.stats.poisson_binomial import poisson_binomial_sf

__all__ = [
    "label_codes",
    "monte_carlo_pvalue",
    "poisson_binomial_sf",
    "sign_flip_test",
    "upper_critical_value",
]


def label_codes(labels: Sequence[Hashable]) -> tuple[NDArray[np.int64], tuple[Any, ...]]:
    """``(codes, names)``: ``names[codes[i]] == labels[i]``, names in order of first appearance."""
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(x, len(index)) for x in labels), dtype=np.int64, count=len(labels))
    return codes, tuple(index)


def monte_carlo_pvalue(null: ArrayLike, observed: float, *, tol: float = 0.0) -> float:
    """One-sided Monte Carlo p-value: ``(1 + #{null >= observed - tol}) / (1 + len(null))``.

    ``tol`` absorbs floating-point noise when the statistic is a float sum of rationals;
    integer statistics need none.
    """
    t = np.asarray(null, dtype=np.float64).reshape(-1)
    return float((1 + np.count_nonzero(t >= observed - tol)) / (1 + t.size))


def upper_critical_value(null: ArrayLike, alpha: float) -> float:
    """The ``1 - alpha`` quantile of ``null`` by the inverted empirical CDF (an observed value)."""
    check_alpha(alpha)
    t = np.asarray(null, dtype=np.float64).reshape(-1)
    if t.size == 0:
        raise ValueError("null sample is empty")
    return float(np.quantile(t, 1.0 - alpha, method="inverted_cdf"))


def sign_flip_test(differences: ArrayLike) -> tuple[int, float]:
    """Exact two-sided paired sign-flip test of ``sum(d)`` for integer differences ``d``.

    Under the null every ``d_i`` is as likely to be ``-d_i``; the p-value is the share of the
    ``2^n`` sign patterns whose sum is at least as far from 0 as the observed one, counted
    exactly (the distribution of the flipped sum by convolution over the ``|d_i|``). Returns
    ``(observed sum, p)``."""
    d = np.asarray(differences).reshape(-1)
    if d.size and not np.all(np.equal(np.mod(d, 1), 0)):
        raise ValueError("sign_flip_test needs integer differences")
    a = np.abs(d.astype(np.int64))
    total = int(a.sum())
    observed = int(d.astype(np.int64).sum())
    # counts[s + total] = number of sign patterns with sum s (integer counts, exact in Python ints)
    counts = [0] * (2 * total + 1)
    counts[total] = 1
    for x in a.tolist():
        if x == 0:
            counts = [2 * c for c in counts]
            continue
        nxt = [0] * (2 * total + 1)
        for i, c in enumerate(counts):
            if c:
                nxt[i - x] += c
                nxt[i + x] += c
        counts = nxt
    extreme = sum(c for i, c in enumerate(counts) if abs(i - total) >= abs(observed))
    return observed, extreme / float(2 ** int(a.size))
