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

import numpy as np

from lmaudit.results import Interval, JsonRecord
from lmaudit.stats.intervals import clopper_pearson

__all__ = [
    "CONFIDENCE",
    "AcrossItems",
    "LabelEffectSummary",
    "MeanSummary",
    "ShareSummary",
    "across_items",
    "label_effect_summary",
    "mean_summary",
    "share_summary",
]

#: the level of every across-item interval
CONFIDENCE = 0.95


class MeanSummary(JsonRecord):
    """The mean of one value per item, with its t interval (None below two items)."""

    n: int
    mean: float | None
    ci: Interval | None
    method: str = "t interval over items"


class ShareSummary(JsonRecord, kw_only=True):
    """``k`` of ``n`` items, with the exact Clopper-Pearson interval (None for no item)."""

    k: int
    n: int
    share: float | None  # k / n (None: no item)
    ci: Interval | None
    method: str = "Clopper-Pearson (exact)"


class LabelEffectSummary(MeanSummary, kw_only=True):
    """The mean |ΔOSS| between label mappings over the items measured under two or more, and
    whether it is *large*: the lower end of its interval above ``large_threshold``."""

    quantity: str = "|delta OSS| between label mappings, per item"
    large_threshold: float
    large: bool


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
        return MeanSummary(n, mean, Interval(mean, mean))
    from scipy.special import stdtrit  # imported here: plans and reports do not need it

    half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * float(x.std(ddof=1)) / math.sqrt(n)
    return MeanSummary(n, mean, Interval(max(mean - half, 0.0), mean + half))


def share_summary(k: int, n: int, confidence: float = CONFIDENCE) -> ShareSummary:
    """``k`` of ``n`` with its exact Clopper-Pearson interval (None when ``n = 0``)."""
    if n == 0:
        return ShareSummary(k=k, n=n, share=None, ci=None)
    lo, hi = clopper_pearson(k, n, 1.0 - confidence)
    return ShareSummary(k=k, n=n, share=k / n, ci=Interval(float(lo), float(hi)))


class AcrossItems(JsonRecord):
    """What the items of a run say together (``results.summary``)."""

    confidence: float
    mean_abs_q: MeanSummary
    share_violated: ShareSummary
    label_effect: LabelEffectSummary | None  # |ΔOSS| between mappings; None when no item has two

    @property
    def label_effect_large(self) -> bool:
        """Whether the mean |ΔOSS| exceeds the threshold at the interval's level (one-sided)."""
        return self.label_effect is not None and self.label_effect.large


def label_effect_summary(
    delta_oss: Sequence[float], threshold: float, confidence: float
) -> LabelEffectSummary:
    """The mean |ΔOSS| with its interval, large when the interval's lower end exceeds ``threshold``."""
    m = mean_summary(delta_oss, confidence)
    return LabelEffectSummary(
        n=m.n,
        mean=m.mean,
        ci=m.ci,
        large_threshold=threshold,
        large=m.ci is not None and m.ci.lo > threshold,
    )


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
        mean_abs_q=mean_summary(abs_q, confidence),
        share_violated=share_summary(int(sum(bool(v) for v in violated)), len(violated), confidence),
        label_effect=label_effect_summary(delta_oss, large_threshold, confidence) if len(delta_oss) else None,
    )
