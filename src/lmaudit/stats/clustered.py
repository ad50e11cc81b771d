"""The mean of clustered scores and its standard errors: naive (every score independent) and
clustered (Miller 2024, "Adding error bars to evals", arXiv 2411.00640), the design effect and
the one-way ANOVA intraclass correlation ICC(1).

``groups`` holds one cluster's scores each (an eval sample's epochs). With ``n`` scores, mean
``m`` and clusters ``c``:

* ``se_naive``: ``sqrt(m (1 - m) / n)`` when every score is 0 or 1, else the sample standard
  deviation (``ddof=1``) over ``sqrt(n)``;
* ``se_clustered = sqrt(sum_c (sum_i (x_ci - m))^2) / n``, the cluster-robust (sandwich)
  standard error of an intercept-only regression without small-sample correction;
* ``design_effect = (se_clustered / se_naive)^2``;
* ``icc = (MSB - MSW) / (MSB + (k0 - 1) MSW)``, ``k0`` the common cluster size, or
  ``(n - sum n_c^2 / n) / (clusters - 1)`` when sizes differ.

Sums are exact (``math.fsum``), so the numbers do not depend on the order of the scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ClusteredMean", "clustered_mean"]


@dataclass(frozen=True)
class ClusteredMean:
    """The mean of clustered scores with its naive and clustered standard errors (None where
    undefined: fewer than two scores or clusters, or no spread)."""

    n: int
    clusters: int
    mean: float
    binary: bool
    se_naive: float | None
    se_clustered: float
    design_effect: float | None
    icc: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _icc(groups: Sequence[Sequence[float]], mean: float, n: int) -> float | None:
    """ICC(1) from the one-way ANOVA mean squares (None: fewer than two clusters, no score
    beside another in a cluster, or no spread at all)."""
    c = len(groups)
    if c < 2 or n - c < 1:
        return None
    means = [math.fsum(g) / len(g) for g in groups]
    msb = math.fsum(len(g) * (m - mean) ** 2 for g, m in zip(groups, means, strict=True)) / (c - 1)
    msw = math.fsum((x - m) ** 2 for g, m in zip(groups, means, strict=True) for x in g) / (n - c)
    sizes = {len(g) for g in groups}
    k0 = sizes.pop() if len(sizes) == 1 else (n - math.fsum(len(g) ** 2 for g in groups) / n) / (c - 1)
    denominator = msb + (k0 - 1) * msw
    return (msb - msw) / denominator if denominator > 0 else None


def clustered_mean(groups: Sequence[Sequence[float]]) -> ClusteredMean:
    """The mean of every score in ``groups`` (one non-empty sequence of finite numbers per
    cluster) with its standard errors, design effect and ICC(1); ValueError on empty input."""
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("need at least one cluster, and at least one score in each")
    values = [float(x) for g in groups for x in g]
    if not all(math.isfinite(x) for x in values):
        raise ValueError("scores must be finite numbers")
    n = len(values)
    mean = math.fsum(values) / n
    binary = all(x in (0.0, 1.0) for x in values)
    if binary:
        se_naive: float | None = math.sqrt(mean * (1.0 - mean) / n)
    elif n > 1:
        se_naive = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1) / n)
    else:
        se_naive = None
    se_clustered = math.sqrt(math.fsum(math.fsum(x - mean for x in g) ** 2 for g in groups)) / n
    effect = (se_clustered / se_naive) ** 2 if se_naive else None
    return ClusteredMean(n, len(groups), mean, binary, se_naive, se_clustered, effect, _icc(groups, mean, n))
