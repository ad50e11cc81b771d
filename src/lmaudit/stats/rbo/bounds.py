"""Webber, Moffat & Zobel (2010) bounds on the RBO of two ranking prefixes.

Two evaluated prefixes ``S`` (``s`` items) and ``L`` (``l >= s`` items) of rankings that go on
unseen. With ``X_d`` the seen overlap at depth ``d`` (``S:min(d, s)`` against ``L:d``) and
``w_d = (1-p) p^(d-1)``:

* ``RBO_min`` (eq. 11, uneven form): nothing unseen ever matches, so ``X_d = X_l`` past ``l``:
  ``sum_{d<=l} w_d X_d / d + X_l sum_{d>l} w_d / d``.
* the residual ``RBO_res``: what the unseen items could add at most. At depth ``d`` the overlap
  can grow by the ``d - s`` unseen items of ``S`` (``s < d <= l``), then also by the ``d - l``
  of ``L``, until it is full at ``f = l + s - X_l``:
  ``sum_{s<d<=l} w_d (d-s)/d + sum_{l<d<=f} w_d (2d-l-s)/d + sum_{d>f} w_d (1 - X_l/d)``.
* ``RBO_max = RBO_min + RBO_res``; :func:`lmaudit.stats.rbo.rbo_ext` lies between them.

Strict rankings only (repeats dropped, first occurrence wins). Two empty prefixes: NaN. One
empty prefix is a ranking of which nothing was seen: its minimum is 0 and its maximum 1. (The
PyPI ``rbo`` package 0.1.3 has no bounds; the formulas are the paper's, checked in the tests
against rankings built to reach each bound.)
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from lmaudit.stats.rbo import weight_tables

__all__ = ["RBOBounds", "rbo_bounds", "rbo_max", "rbo_min", "rbo_res"]


@dataclass(frozen=True)
class RBOBounds:
    min: float
    residual: float
    max: float
    p: float


def _strict(ranking: Iterable[Any]) -> list[Hashable]:
    items = list(ranking)
    if any(isinstance(x, set | frozenset | list | tuple) for x in items):
        raise ValueError("RBO bounds take strict rankings (no tie groups)")
    return list(dict.fromkeys(items))


def rbo_bounds(a: Iterable[Any], b: Iterable[Any], p: float = 0.9) -> RBOBounds:
    """``RBO_min``, the residual and ``RBO_max`` of two ranking prefixes (module notes)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p!r}")
    sa, sb = _strict(a), _strict(b)
    if not sa and not sb:
        return RBOBounds(math.nan, math.nan, math.nan, p)
    short, long_ = (sa, sb) if len(sa) <= len(sb) else (sb, sa)
    s, n = len(short), len(long_)
    where = {item: r for r, item in enumerate(long_, 1)}
    entered = [0] * (n + 1)  # entered[e]: common items that enter both prefixes at depth e
    for r, item in enumerate(short, 1):
        j = where.get(item)
        if j is not None:
            entered[max(r, j)] += 1
    x_l = sum(entered)
    f = n + s - x_l
    pw, cum = weight_tables(p, max(64, 1 << max(f - 1, 0).bit_length()))
    c_inf = (1.0 - p) / p * -math.log1p(-p)  # sum_{d>=1} w_d / d
    lo = 0.0
    x = 0
    for d in range(1, n + 1):
        x += entered[d]
        lo += x * (cum[d] - cum[d - 1])
    lo += x_l * (c_inf - cum[n])
    res = (pw[s] - pw[n]) - s * (cum[n] - cum[s])
    res += 2.0 * (pw[n] - pw[f]) - (n + s) * (cum[f] - cum[n])
    res += pw[f] - x_l * (c_inf - cum[f])
    lo = min(1.0, max(0.0, lo))
    res = min(1.0 - lo, max(0.0, res))
    return RBOBounds(min=lo, residual=res, max=lo + res, p=p)


def rbo_min(a: Iterable[Any], b: Iterable[Any], p: float = 0.9) -> float:
    return rbo_bounds(a, b, p).min


def rbo_res(a: Iterable[Any], b: Iterable[Any], p: float = 0.9) -> float:
    return rbo_bounds(a, b, p).residual


def rbo_max(a: Iterable[Any], b: Iterable[Any], p: float = 0.9) -> float:
    return rbo_bounds(a, b, p).max
