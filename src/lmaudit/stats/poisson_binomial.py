"""The upper tail ``P(X >= k)`` of a Poisson-binomial count ``X = sum_i Bernoulli(p_i)``.

Two exact computations (exact up to floating-point rounding; neither approximates the law):

* up to :data:`DIRECT_MAX` probabilities, the sequential recursion: one Bernoulli at a time
  over the support so far, ``O(n^2)``, every operation a sum of non-negative terms (relative
  error of each term about ``n`` units in the last place);
* beyond it, the exponentially tilted distribution convolved by divide and conquer with FFTs,
  ``O(n log^2 n)``. With ``theta`` chosen so that the tilted probabilities
  ``q_i = p_i e^theta / (1 - p_i + p_i e^theta)`` sum to ``k`` (``theta = 0`` when ``k`` is at
  most the mean),

      P(X = j) = P_q(X = j) exp(log M(theta) - theta j),   M(theta) = prod (1 - p_i + p_i e^theta),

  so the tail is ``exp(log M - theta k) sum_{j >= k} P_q(X = j) e^{-theta (j - k)}``. The terms
  that carry the tail are the tilted law's largest ones, where an FFT convolution (absolute
  error about ``1e-16`` of the largest term) is accurate in relative terms; without the tilt a
  tail of ``1e-20`` would be lost in that absolute error. Measured relative error against the
  recursion and against ``scipy.stats.binom.sf`` (identical ``p_i``): about ``1e-13`` at
  ``n = 10^4``, ``1e-11`` at ``10^5``, below ``1e-10`` at ``10^6``, from the mean out to tails
  of ``1e-300`` (``tests/stats/test_poisson_binomial.py`` holds it to :data:`FFT_RTOL`). Tails
  below the smallest double are returned as 0.

``scipy.stats.poisson_binom`` computes the same law, but its ``sf`` is ``1 - cdf`` (a tail of
``1.8e-27`` comes out as ``8.8e-15``) and its cost grows with ``n^2``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from lmaudit.stats.arrays import FloatArray

__all__ = ["DIRECT_MAX", "FFT_RTOL", "poisson_binomial_sf"]

DIRECT_MAX = 2048  # up to this many probabilities (or this many left once 0s and 1s are out): the recursion
FFT_RTOL = 1e-9  # the relative error the tests hold the tilted FFT path to
_BLOCK = 64  # Bernoullis per leaf of the divide and conquer (leaves built by the recursion)


def poisson_binomial_sf(probs: ArrayLike, k: int) -> float:
    """``P(X >= k)`` for ``X = sum_i Bernoulli(probs[i])`` (independent), exactly (module docs)."""
    p = np.clip(np.asarray(probs, dtype=np.float64).reshape(-1), 0.0, 1.0)
    if p.size > DIRECT_MAX:
        # a certain success lowers k by one; a certain failure adds nothing
        k -= int(np.count_nonzero(p == 1.0))
        p = p[(p > 0.0) & (p < 1.0)]
    if k <= 0:
        return 1.0
    if k > p.size:
        return 0.0
    if p.size <= DIRECT_MAX:
        return _sf_recursion(p, k)
    return _sf_tilted(p, k)


def _sf_recursion(p: FloatArray, k: int) -> float:
    """The tail from the pmf built one Bernoulli at a time (``O(n^2)``)."""
    return float(min(1.0, max(0.0, _recursion_pmfs(p[None, :])[0, k:].sum())))


def _recursion_pmfs(q: FloatArray) -> FloatArray:
    """The pmfs ``(rows, n + 1)`` of the rows of ``q`` ``(rows, n)``, adding one Bernoulli at a
    time over the support so far (``O(n^2)``; every operation a sum of non-negative terms)."""
    rows, n = q.shape
    pm = np.zeros((rows, n + 1), dtype=np.float64)
    pm[:, 0] = 1.0
    for i in range(n):
        # pm'[j] = pm[j] (1 - q) + pm[j - 1] q, over the support so far
        qi = q[:, i : i + 1]
        pm[:, 1 : i + 2] = pm[:, 1 : i + 2] * (1.0 - qi) + pm[:, : i + 1] * qi
        pm[:, 0] *= 1.0 - qi[:, 0]
    return pm


def _sf_tilted(p: FloatArray, k: int) -> float:
    """The tail through the law tilted to mean ``k`` (``0 < p_i < 1``, ``0 < k <= n``)."""
    # scipy is imported here: the recursion, and the modules importing this one, run without it
    from scipy.special import expit, logit

    n = p.size
    if k == n:
        return float(np.exp(np.log(p).sum()))
    theta = _tilt(p, k) if k > p.sum() else 0.0
    q = expit(logit(p) + theta) if theta > 0.0 else p
    log_m = float(np.logaddexp(np.log1p(-p), np.log(p) + theta).sum()) if theta > 0.0 else 0.0
    tail = _pmf(q)[k:]
    weighted = float((tail * np.exp(-theta * np.arange(tail.size))).sum())
    return float(min(1.0, max(0.0, np.exp(log_m - theta * k) * weighted)))


def _tilt(p: FloatArray, k: int) -> float:
    """``theta >= 0`` with ``sum expit(logit(p_i) + theta) = k`` (for ``mean < k < n``)."""
    from scipy.optimize import brentq
    from scipy.special import expit, logit

    lp = logit(p)

    def excess(theta: float) -> float:
        return float(expit(lp + theta).sum()) - k

    if excess(0.0) >= 0.0:  # the mean within rounding of k: no tilt needed
        return 0.0
    hi = 1.0
    while excess(hi) < 0.0:
        hi *= 2.0
    # theta's precision only moves the tilted mean by a fraction of a standard deviation
    return float(brentq(excess, 0.0, hi, xtol=1e-8, rtol=1e-10))


def _pmf(q: FloatArray) -> FloatArray:
    """The Poisson-binomial pmf ``(n + 1,)``: leaves of :data:`_BLOCK` Bernoullis by the
    recursion (all leaves at once), then pairs of neighbours convolved by FFT, level by level."""
    from scipy.signal import fftconvolve

    n = q.size
    leaves = -(-n // _BLOCK)
    qs = np.zeros((leaves, _BLOCK))
    qs.reshape(-1)[:n] = q  # padding with Bernoulli(0): the point mass at 0, the convolution's identity
    pm = _recursion_pmfs(qs)
    while pm.shape[0] > 1:
        if pm.shape[0] % 2:
            unit = np.zeros((1, pm.shape[1]))
            unit[0, 0] = 1.0
            pm = np.vstack([pm, unit])
        pm = fftconvolve(pm[0::2], pm[1::2], axes=1)
        np.maximum(pm, 0.0, out=pm)  # rounding noise around 0 is not probability
    return pm[0, : n + 1]
