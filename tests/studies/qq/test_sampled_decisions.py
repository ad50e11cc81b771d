"""The sampled estimand's decisions carry sampling error (studies/qq/sampling_error.py).

Closed forms: the per-position bounds are the one-sided exact Clopper-Pearson lower bounds
(scipy's beta quantiles) and miss their parameter with probability at most their level (exact
binomial sums); the box envelope equals vertex enumeration and brute force. Ground truth: the
projective agent satisfies QQ exactly, so no item may be VIOLATED or CONTEXTUAL at any n, and a
Monte Carlo over seeds bounds the per-item false-positive and miss rates by alpha; on a violating
agent the share of truly violating items certified VIOLATED rises with n; a mixture over the
sampled base carries every component's sampling error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig
from scipy import stats

from lmaudit.backends.sim import build_sim_backend
from lmaudit.pipeline import run
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.calibration import calibrate, draw_sampled, miss_probability
from lmaudit.studies.qq.estimation import analyze
from lmaudit.studies.qq.measure import agent_rows
from lmaudit.studies.qq.planning import cells_for
from lmaudit.studies.qq.records import Measurement
from lmaudit.studies.qq.result import QQParams
from lmaudit.studies.qq.sampling_error import bounds_per_item, position_bounds

ALPHA = 0.05


def _truth(make_cfg: Callable[..., DictConfig], model: str) -> list[Measurement]:
    """The agent's exact label probabilities at every position of the pilot bank (log-prob rows)."""
    cfg = make_cfg(f"model={model}", name=model)
    rows = agent_rows(cells_for(cfg), build_sim_backend(cfg.model), "logprob", {})
    return [Measurement.from_json({k: v for k, v in r.items() if k != "kind"}) for r in rows]


# ---------------------------------------------------------------- closed forms


@pytest.mark.parametrize("n", [1, 7, 20, 200, 1000])
def test_position_bounds_are_one_sided_exact_lower_bounds(n: int) -> None:
    """L = Beta(a; k, n - k + 1) (0 at k = 0); the upper end is 1 - L of the n count."""
    a = 0.05 / 24
    k = np.arange(n + 1)
    lo, hi = position_bounds(k, n - k, n, a)
    want = np.where(k > 0, stats.beta.ppf(a, np.maximum(k, 1), n - k + 1), 0.0)
    np.testing.assert_allclose(lo, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(1.0 - hi, want[::-1], rtol=0, atol=1e-12)
    # each bound misses its parameter with probability <= a, for every p (exact binomial sums)
    for p in np.linspace(0.0, 1.0, 101):
        miss = stats.binom.pmf(k, n, p)[lo > p].sum()
        assert miss <= a + 1e-12, (n, p, miss)


def test_non_label_draws_widen_the_range_to_every_allocation() -> None:
    """With other draws, P(y) may be anything from P(y) alone to P(y) plus all the other mass."""
    lo, hi = position_bounds(60, 100, 200, 0.01)
    assert lo == pytest.approx(stats.beta.ppf(0.01, 60, 141), abs=1e-12)
    assert hi == pytest.approx(1.0 - stats.beta.ppf(0.01, 100, 101), abs=1e-12)
    assert lo < 60 / 200 and hi > 1 - 100 / 200  # the frequencies' own allocation range lies inside


def test_box_envelope_is_exact() -> None:
    """Vertex enumeration over a box equals the brute-force range over a dense interior sample
    (within 1e-12, never beyond), and the mass envelope is the box [p_y, p_y + o] / total."""
    rng = np.random.default_rng(7)
    lo = rng.uniform(0, 0.6, size=(20, 6))
    hi = lo + rng.uniform(0, 0.4, size=(20, 6))
    box = env.box_envelope(lo, hi)
    x = lo[:, None, :] + rng.uniform(size=(20, 20000, 6)) * (hi - lo)[:, None, :]
    q, oe_a, oe_b = env.qq_statistics(x)
    for name, vals in (("q", q), ("oe_a", oe_a), ("oe_b", oe_b)):
        assert np.all(vals.min(-1) >= getattr(box, f"{name}_lo") - 1e-12), name
        assert np.all(vals.max(-1) <= getattr(box, f"{name}_hi") + 1e-12), name
    p_y, p_n, o = rng.uniform(size=(3, 5, 6))
    total = p_y + p_n + o
    a, b = env.envelope(p_y, p_n, o), env.box_envelope(p_y / total, (p_y + o) / total)
    for f in ("q_lo", "q_hi", "oe_a_lo", "oe_a_hi", "oe_b_lo", "oe_b_hi"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    with pytest.raises(ValueError, match="lo <= hi"):
        env.box_envelope(hi, lo)


def test_region_spends_alpha_over_the_items_bounds(make_cfg: Callable[..., DictConfig]) -> None:
    """Bonferroni per item: 24 one-sided bounds for an A/B item (two mappings), 12 for Yes/No."""
    truth = _truth(make_cfg, "sim_projective")
    res = analyze(draw_sampled(truth, 50, np.random.default_rng(0)), QQParams(estimand="sampled"))
    assert res.sampling is not None
    doc = res.to_json()["sampling_error"]
    assert doc["method"] == "bonferroni-clopper-pearson" and doc["alpha"] == ALPHA
    for reg, it in zip(res.sampling.items, res.items, strict=True):
        assert reg.item == it.item
        assert reg.n_bounds == bounds_per_item(len(it.mappings)) == 12 * len(it.mappings)
        assert reg.alpha_bound == pytest.approx(ALPHA / reg.n_bounds, rel=1e-15)
        assert reg.min_draws == 50
    # the level is a parameter of sampled runs only: log-prob results keep their exact fields
    assert res.to_json()["params"]["sampled_alpha"] == ALPHA
    assert "sampled_alpha" not in QQParams().to_json()
    assert "sampling_error" not in analyze(truth).to_json()


def test_a_sampled_record_without_counts_decides_nothing() -> None:
    """n unknown: the position's P(y) may be anything, so no verdict is certified from it."""
    base = dict(stratum="S3", mapping="yesno", label_of={"y": "Yes", "n": "No"}, other=0.0)
    where = [("AB", 1, "A", None), ("AB", 2, "B", "y"), ("AB", 2, "B", "n")]
    where += [("BA", 1, "B", None), ("BA", 2, "A", "y"), ("BA", 2, "A", "n")]
    ys = [1.0, 0.0, 1.0, 1.0, 1.0, 1.0]  # x = (1, 0, 1, 1, 1, 1): M_AB = 1, M_BA = 0, q = 1

    def records(estimand: str) -> list[Measurement]:
        return [
            Measurement(
                item="x",
                order=o,
                position=pos,
                question=qn,
                first_answer=f,
                probs={"Yes": y, "No": 1.0 - y},
                estimand=estimand,
                **base,
            )
            for (o, pos, qn, f), y in zip(where, ys, strict=True)
        ]

    assert analyze(records("logprob")).items[0].verdict == env.VIOLATED  # read as exact: q = 1
    res = analyze(records("sampled"), QQParams(estimand="sampled"))
    assert res.items[0].verdict == env.INDETERMINATE
    assert (res.items[0].q_env.lo, res.items[0].q_env.hi) == (-1.0, 1.0)


# ---------------------------------------------------------------- ground truth


@pytest.mark.parametrize("n", [20, 50, 200, 1000])
def test_projective_agent_is_never_violated_when_sampled(
    make_cfg: Callable[..., DictConfig], tmp_path: Path, n: int
) -> None:
    """The whole pipeline on the agent that satisfies QQ exactly: sampling noise is not certified
    as violation or contextuality at any n (fixed seed), and the report says why."""
    name = f"smp{n}"
    run(
        make_cfg(
            "model=sim_projective", "estimand=sampled", f"estimand.n={n}", "mlflow.enabled=false", name=name
        )
    )
    res = json.loads((tmp_path / name / "results.json").read_text())
    assert res["counts"]["verdict"]["VIOLATED"] == 0
    assert res["counts"]["gamma_class"]["CONTEXTUAL"] == 0
    assert res["params"]["sampled_alpha"] == ALPHA
    assert res["sampling_error"]["method"] == "bonferroni-clopper-pearson"
    for it in res["items"]:
        lo, hi = it["q_env"]
        assert lo <= 0.0 <= hi, it["item"]  # the range holds the true q = 0
    report = (tmp_path / name / "report.html").read_text()
    assert "every verdict allows for sampling error" in report
    assert "Bonferroni-adjusted" in report


@pytest.mark.parametrize("model", ["sim_projective", "sim_repetition"])
def test_false_positive_rate_per_item_is_at_most_alpha(
    make_cfg: Callable[..., DictConfig], model: str
) -> None:
    """Monte Carlo over seeds on QQ-satisfying agents (q = 0; the repetition agent with order
    effects, Gamma = -OSS < 0): per item, the share of replicates certified VIOLATED or CONTEXTUAL
    is at most alpha, and so is the share whose region misses the truth at some position, pooled
    over items and n (25 replicates x 18 items x 4 n; tolerance 3 binomial sd, 0.015)."""
    truth = _truth(make_cfg, model)
    points = calibrate(truth, [20, 50, 200, 1000], reps=25, params=QQParams(), seed=20260701)
    missed = trials = 0
    for pt in points:
        assert pt.satisfying.all() and pt.noncontextual.all()
        assert np.all(pt.false_violated_rate() <= ALPHA), (pt.n, pt.false_violated_rate())
        assert np.all(pt.false_contextual_rate() <= ALPHA), (pt.n, pt.false_contextual_rate())
        missed += int(pt.missed.sum())
        trials += pt.reps * len(pt.items)
    assert missed / trials <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / trials)


def test_miss_probability_per_item_is_at_most_alpha(make_cfg: Callable[..., DictConfig]) -> None:
    """The region's simultaneous coverage per item on the projective agent: the exact probability
    that it misses the truth somewhere (positions are drawn independently) is at most alpha at
    every n, and a Monte Carlo of 4,000 replicates at n = 200 agrees with it within 4 binomial sd
    per item (at most 0.014)."""
    truth = _truth(make_cfg, "sim_projective")
    for n in (20, 200, 1000, 5000):
        exact = miss_probability(truth, n, ALPHA)
        assert len(exact) == 18 and max(exact.values()) <= ALPHA, (n, exact)
    reps, n = 4000, 200
    exact = miss_probability(truth, n, ALPHA)
    p = np.array([m.p_y for m in truth])
    items = list(dict.fromkeys(m.item for m in truth))
    maps = {it: len({m.mapping for m in truth if m.item == it}) for it in items}
    a = np.array([ALPHA / bounds_per_item(maps[m.item]) for m in truth])
    k = np.random.default_rng(11).binomial(n, p, size=(reps, p.size))
    lo, hi = position_bounds(k, n - k, n, np.broadcast_to(a, k.shape))
    miss = (lo > p) | (hi < p)
    for it in items:
        rate = miss[:, [m.item == it for m in truth]].any(axis=1).mean()
        assert abs(rate - exact[it]) <= 4 * np.sqrt(exact[it] * (1 - exact[it]) / reps), (it, rate, exact[it])


def test_power_on_a_violating_agent_rises_with_n(make_cfg: Callable[..., DictConfig]) -> None:
    """Polarity-dependent repetition (q = -0.6 (u - v)): the share of truly violating items
    certified VIOLATED rises with n, and items within the margin are never certified."""
    truth = _truth(make_cfg, "sim_mixture")
    points = calibrate(truth, [50, 200, 1000, 5000], reps=10, params=QQParams(), seed=3)
    power = [pt.power() for pt in points]
    assert all(p is not None for p in power)
    assert power == sorted(power) and power[0] < power[-1], power  # type: ignore[type-var]
    assert power[-1] is not None and power[-1] >= 0.6, power
    for pt in points:
        assert pt.violated[pt.satisfying].sum() == 0
        assert np.all(pt.false_contextual_rate()[pt.noncontextual] <= ALPHA)


def test_a_mixture_over_the_sampled_base_carries_every_components_sampling_error(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    """Two order-matched components of the projective agent, each sampled (n = 200): the
    aggregate's envelope spans both components' regions at alpha / 2 each, so no item is
    certified VIOLATED or CONTEXTUAL (read as exact, 5 of 18 were), and the report says why."""
    over = (
        "estimand=mixture",
        "study.estimand.mixture.base=sampled",
        "study.estimand.mixture.personas=[none,iowa-farmer]",
        "study.estimand.mixture.temperatures=[1.0]",
        "estimand.n=200",
        "study.gates.g3.enabled=false",
        "mlflow.enabled=false",
    )
    run(make_cfg("model=sim_projective", *over, name="mix"))
    res = json.loads((tmp_path / "mix" / "results.json").read_text())
    assert res["counts"]["verdict"]["VIOLATED"] == 0
    assert res["counts"]["gamma_class"]["CONTEXTUAL"] == 0
    region = res["sampling_error"]
    assert region["alpha"] == ALPHA
    for it in region["items"]:
        n_maps = 1 if it["item"].startswith("s3-") else 2
        assert it["n_bounds"] == 2 * 12 * n_maps  # two components
        assert it["alpha_bound"] == pytest.approx(ALPHA / (2 * 12 * n_maps), rel=1e-15)
    for comp in res["mixture"]["components"]:  # each decided over its own region at alpha
        assert comp["counts"]["verdict"]["VIOLATED"] == 0, comp["id"]
    assert "every verdict allows for sampling error" in (tmp_path / "mix" / "report.html").read_text()
