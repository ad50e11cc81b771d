"""Across-item summaries of a QQ run (results.summary): the t interval of mean |q| against its
closed form, the share VIOLATED's Clopper-Pearson interval against R and an independent
implementation, "large" label-mapping effects, and the summary of a real analysis read
back against its own items."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from test_report import make_results

from lmaudit.stats.intervals import clopper_pearson
from lmaudit.studies.qq.summary import across_items, mean_summary, share_summary
from lmaudit.studies.qq.views import metrics


def test_the_mean_interval_is_the_t_interval_in_closed_form() -> None:
    x = np.random.default_rng(20261205).uniform(0.0, 0.4, size=9)
    n, m, s = x.size, x.mean(), x.std(ddof=1)
    half = stats.t.ppf(0.975, n - 1) * s / math.sqrt(n)
    got = mean_summary(list(x))
    assert got.n == 9 and got.mean == pytest.approx(m, abs=1e-15)
    assert got.ci is not None and (got.ci.lo, got.ci.hi) == pytest.approx((m - half, m + half), abs=1e-12)


def test_the_mean_interval_is_cut_at_zero_and_needs_two_items() -> None:
    got = mean_summary([0.0, 0.0, 0.01])  # m - half < 0: |q| cannot be negative
    assert got.ci is not None and got.ci.lo == 0.0
    assert got.ci.hi == pytest.approx(
        0.01 / 3 + stats.t.ppf(0.975, 2) * np.std([0, 0, 0.01], ddof=1) / 3**0.5
    )
    assert mean_summary([0.2]).ci is None and mean_summary([]).mean is None
    point = mean_summary([0.2, 0.2, 0.2]).ci
    assert point is not None and (point.lo, point.hi) == pytest.approx(
        (0.2, 0.2), abs=1e-15
    )  # no spread: the point


def test_the_mean_interval_is_scipys_t_interval() -> None:
    for seed, n in ((1, 2), (2, 5), (3, 18)):
        x = np.random.default_rng(seed).exponential(0.1, size=n)
        ci = stats.ttest_1samp(x, 0.0).confidence_interval(confidence_level=0.95)
        got = mean_summary(list(x)).ci
        assert got is not None and got.hi == pytest.approx(ci.high, rel=1e-12)
        assert got.lo == pytest.approx(max(ci.low, 0.0), abs=1e-12)


def test_the_share_interval_is_clopper_pearson() -> None:
    # R: binom.test(3, 10)$conf.int = 0.06673951 0.65245285
    got = share_summary(3, 10)
    assert got.share == 0.3 and got.ci is not None
    assert (got.ci.lo, got.ci.hi) == pytest.approx((0.06673951, 0.65245285), abs=1e-8)
    for k, n in ((0, 7), (7, 7), (5, 18), (1, 1), (4, 9)):
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        got_ci = share_summary(k, n).ci
        assert got_ci is not None and (got_ci.lo, got_ci.hi) == pytest.approx((ci.low, ci.high), abs=1e-12), (
            k,
            n,
        )
    assert share_summary(0, 0).ci is None and share_summary(0, 0).share is None


def test_a_label_effect_is_large_only_when_its_interval_clears_the_threshold() -> None:
    big = across_items([0.1, 0.2], [False, True], [0.50, 0.55, 0.60, 0.52], large_threshold=0.3)
    assert big.label_effect is not None and big.label_effect.ci is not None
    assert big.label_effect.ci.lo > 0.3 and big.label_effect_large
    # mean above the threshold, but the interval reaches below it: not claimed
    near = across_items([0.1, 0.2], [False, True], [0.2, 0.6, 0.35], large_threshold=0.3)
    assert near.label_effect is not None and near.label_effect.mean > 0.3 and not near.label_effect_large
    assert not across_items([0.1], [False], [0.9], large_threshold=0.3).label_effect_large  # one item
    assert across_items([0.1], [False], [], large_threshold=0.3).to_json()["label_effect"] is None


def test_the_results_summary_is_computed_from_the_analysed_items() -> None:
    typed = make_results(sampled=False)
    res = typed.to_json()
    items = res["items"]
    summ = res["summary"]
    k = sum(it["verdict"] == "VIOLATED" for it in items)
    assert summ["share_violated"]["k"] == k and summ["share_violated"]["n"] == len(items) == res["n_items"]
    assert summ["share_violated"]["ci"] == pytest.approx(list(clopper_pearson(k, len(items))), abs=1e-10)
    abs_q = np.abs([it["q"] for it in items])
    assert summ["mean_abs_q"]["mean"] == pytest.approx(abs_q.mean(), abs=1e-15)
    half = stats.t.ppf(0.975, abs_q.size - 1) * abs_q.std(ddof=1) / math.sqrt(abs_q.size)
    assert summ["mean_abs_q"]["ci"][1] == pytest.approx(abs_q.mean() + half, abs=1e-12)
    deltas = [it["label_effect"]["delta_oss"] for it in items if it["label_effect"] is not None]
    assert summ["label_effect"]["n"] == len(deltas) >= 2
    assert summ["label_effect"]["mean"] == pytest.approx(np.mean(deltas), abs=1e-15)
    assert summ["label_effect"]["large_threshold"] == res["params"]["memorization_threshold"]
    m = metrics(typed)
    assert m["summary.mean_abs_q"] == summ["mean_abs_q"]["mean"]
    assert m["summary.share_violated_ci_high"] == summ["share_violated"]["ci"][1]
    assert m["summary.label_effect_large"] == float(summ["label_effect"]["large"])


def test_one_mapping_has_no_label_effect() -> None:
    res = make_results(ab_mappings=("map1",), sampled=False)
    assert res.across_items.label_effect is None
    assert "summary.label_effect_abs_delta_oss" not in metrics(res)
