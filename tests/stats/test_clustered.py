"""The clustered mean's standard errors, design effect and ICC(1) against a hand enumeration,
statsmodels' cluster-robust OLS on an intercept and scipy's one-way ANOVA."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import f_oneway

from lmaudit.stats.clustered import clustered_mean

sm = pytest.importorskip("statsmodels.api")

TOL = 1e-12  # closed forms and the independent implementations agree to rounding


def test_a_hand_enumeration() -> None:
    # 3 samples x 2 epochs: (1, 1), (0, 0), (1, 0): mean 1/2
    cm = clustered_mean([[1, 1], [0, 0], [1, 0]])
    assert (cm.n, cm.clusters, cm.binary) == (6, 3, True)
    assert cm.mean == 0.5
    assert cm.se_naive == pytest.approx(math.sqrt(0.25 / 6), abs=TOL)
    # cluster sums of (x - 1/2): 1, -1, 0 -> sqrt(2) / 6
    assert cm.se_clustered == pytest.approx(math.sqrt(2) / 6, abs=TOL)
    assert cm.design_effect == pytest.approx((math.sqrt(2) / 6) ** 2 / (0.25 / 6), abs=TOL)
    # MSB = 2 * (1/4 + 1/4 + 0) / 2 = 1/2, MSW = (0 + 0 + 1/2) / 3 = 1/6, k0 = 2
    assert cm.icc == pytest.approx((1 / 2 - 1 / 6) / (1 / 2 + 1 / 6), abs=TOL)


def _ols(values: np.ndarray, groups: np.ndarray) -> tuple[float, float, float]:
    """statsmodels: the intercept, its cluster-robust SE without small-sample correction, and
    its ordinary SE."""
    x = np.ones((len(values), 1))
    robust = sm.OLS(values, x).fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False})
    plain = sm.OLS(values, x).fit()
    return float(robust.params[0]), float(robust.bse[0]), float(plain.bse[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_against_statsmodels_cluster_robust_ols(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, size=25)  # unbalanced clusters
    groups = [list(rng.normal(rng.normal(), 1.0, size=k)) for k in sizes]
    cm = clustered_mean(groups)
    values = np.concatenate([np.asarray(g) for g in groups])
    labels = np.repeat(np.arange(len(groups)), sizes)
    mean, se_cluster, se_plain = _ols(values, labels)
    assert not cm.binary
    assert cm.mean == pytest.approx(mean, abs=1e-12)
    assert cm.se_clustered == pytest.approx(se_cluster, rel=1e-10)
    assert cm.se_naive == pytest.approx(se_plain, rel=1e-10)  # sample SD / sqrt(n)


def test_binary_scores_against_statsmodels() -> None:
    rng = np.random.default_rng(7)
    p = rng.uniform(0.05, 0.95, size=40)
    groups = [list((rng.random(12) < q).astype(float)) for q in p]  # 40 samples x 12 epochs
    cm = clustered_mean(groups)
    values = np.concatenate(groups)
    _, se_cluster, _ = _ols(values, np.repeat(np.arange(40), 12))
    assert cm.binary and cm.se_clustered == pytest.approx(se_cluster, rel=1e-10)
    assert cm.se_naive == pytest.approx(math.sqrt(values.mean() * (1 - values.mean()) / 480), rel=1e-12)
    assert cm.design_effect is not None and cm.design_effect > 2  # samples differ: epochs agree


def _icc_from_f(groups: list[list[float]]) -> float:
    """ICC(1) = (F - 1) / (F + k0 - 1) from scipy's one-way ANOVA F."""
    n, c = sum(map(len, groups)), len(groups)
    k0 = (n - sum(len(g) ** 2 for g in groups) / n) / (c - 1)
    f = float(f_oneway(*groups).statistic)
    return (f - 1) / (f + k0 - 1)


@pytest.mark.parametrize("balanced", [True, False])
def test_icc_against_scipy_anova(balanced: bool) -> None:
    rng = np.random.default_rng(11)
    sizes = [5] * 20 if balanced else list(rng.integers(2, 10, size=20))
    groups = [list(rng.normal(rng.normal(0, 0.8), 1.0, size=k)) for k in sizes]
    cm = clustered_mean(groups)
    assert cm.icc == pytest.approx(_icc_from_f(groups), rel=1e-10)


def test_undefined_numbers_are_none() -> None:
    one = clustered_mean([[1.0], [0.0], [1.0]])  # one score per cluster: no within-cluster spread
    assert one.icc is None and one.se_clustered == pytest.approx(one.se_naive, abs=TOL)
    same = clustered_mean([[1, 1], [1, 1]])  # no spread
    assert same.se_naive == 0.0 and same.design_effect is None and same.icc is None
    with pytest.raises(ValueError):
        clustered_mean([[1.0], []])
