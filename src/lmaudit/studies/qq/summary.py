"""Across-item summaries of a QQ run, with intervals over items (pure).

* Mean ``|q|`` over the items decided (items with an undefined position are excluded upstream),
  with a Student t interval over items: ``mean ± t_{n-1, 1-alpha/2} s / sqrt(n)``, its lower end
  cut at 0 (the t quantile is ``scipy.special.stdtrit``; the tests check the interval against
  ``scipy.stats.ttest_1samp(...).confidence_interval``). Chosen over a bootstrap over items:
  at the few items a run holds, the percentile bootstrap undercovers (its spread is the plug-in
  ``s sqrt((n-1)/n)`` and it has no t quantile), so the t interval is the wider one.
* The share of items VIOLATED, with the exact Clopper-Pearson interval
  (:func:`lmaudit.stats.intervals.clopper_pearson`, ``scipy.special``'s beta quantiles; the tests
  check it against ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")`` and R).
* The label-mapping effect: ``|ΔOSS|`` per item between its label mappings (items measured
  under more than one), summarised like ``|q|``. It is *large* when the lower end of its
  interval exceeds ``threshold`` (the study's ``memorization_threshold``, the |ΔOSS| it already
  treats as a real difference): a one-sided t test at ``alpha / 2`` that the mean |ΔOSS|
  exceeds it, so "large" is claimed only when the items show it.

Only ``scipy.special`` is imported (as gate G3 does): a sim run does not load ``scipy.stats``
(tests/test_lazy_imports.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lmaudit.stats.intervals import clopper_pearson

__all__ = [
    "CONFIDENCE",
    "AcrossItems",
    "MeanSummary",
    "ShareSummary",
    "across_items",
    "mean_summary",
    "share_summary",
]

#: the level of every across-item interval
CONFIDENCE = 0.95


@dataclass(frozen=True)
class MeanSummary:
    """The mean of one value per item, with its t interval (None below two items)."""

    n: int
    mean: float | None
    ci: tuple[float, float] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mean": self.mean,
            "ci": None if self.ci is None else [self.ci[0], self.ci[1]],
            "method": "t interval over items",
        }


@dataclass(frozen=True)
class ShareSummary:
    """``k`` of ``n`` items, with the exact Clopper-Pearson interval (None for no item)."""

    k: int
    n: int
    ci: tuple[float, float] | None

    @property
    def share(self) -> float | None:
        return self.k / self.n if self.n else None

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "n": self.n,
            "share": self.share,
            "ci": None if self.ci is None else [self.ci[0], self.ci[1]],
            "method": "Clopper-Pearson (exact)",
        }


def mean_summary(values: Sequence[float], confidence: float = CONFIDENCE) -> MeanSummary:
    """Mean of ``values`` (magnitudes, never negative) with its Student t interval over them,
    its lower end cut at 0 (the interval is one point when every value is the same; None below
    two values)."""
    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        return MeanSummary(0, None, None)
    mean = float(x.mean())
    if n < 2:
        return MeanSummary(n, mean, None)
    if float(np.ptp(x)) == 0.0:  # no spread: scipy warns and the interval is the point
        return MeanSummary(n, mean, (mean, mean))
    from scipy.special import stdtrit  # imported here: plans and reports do not need it

    half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * float(x.std(ddof=1)) / math.sqrt(n)
    return MeanSummary(n, mean, (max(mean - half, 0.0), mean + half))


def share_summary(k: int, n: int, confidence: float = CONFIDENCE) -> ShareSummary:
    """``k`` of ``n`` with its exact Clopper-Pearson interval (None when ``n = 0``)."""
    if n == 0:
        return ShareSummary(k, n, None)
    lo, hi = clopper_pearson(k, n, 1.0 - confidence)
    return ShareSummary(k, n, (lo, hi))


@dataclass(frozen=True)
class AcrossItems:
    """What the items of a run say together (``results.summary``)."""

    confidence: float
    abs_q: MeanSummary
    violated: ShareSummary
    label_effect: MeanSummary | None  # |ΔOSS| between mappings; None when no item has two
    large_threshold: float

    @property
    def label_effect_large(self) -> bool:
        """Whether the mean |ΔOSS| exceeds the threshold at the interval's level (one-sided)."""
        le = self.label_effect
        return bool(le is not None and le.ci is not None and le.ci[0] > self.large_threshold)

    def to_json(self) -> dict[str, Any]:
        le = None
        if self.label_effect is not None:
            le = {
                **self.label_effect.to_json(),
                "quantity": "|delta OSS| between label mappings, per item",
                "large_threshold": self.large_threshold,
                "large": self.label_effect_large,
            }
        return {
            "confidence": self.confidence,
            "mean_abs_q": self.abs_q.to_json(),
            "share_violated": self.violated.to_json(),
            "label_effect": le,
        }


def across_items(
    abs_q: Sequence[float],
    violated: Sequence[bool],
    delta_oss: Sequence[float],
    *,
    large_threshold: float,
    confidence: float = CONFIDENCE,
) -> AcrossItems:
    """The summaries of one value per decided item (``delta_oss``: items with two mappings or more)."""
    return AcrossItems(
        confidence=confidence,
        abs_q=mean_summary(abs_q, confidence),
        violated=share_summary(int(sum(bool(v) for v in violated)), len(violated), confidence),
        label_effect=mean_summary(delta_oss, confidence) if len(delta_oss) else None,
        large_threshold=large_threshold,
    )
