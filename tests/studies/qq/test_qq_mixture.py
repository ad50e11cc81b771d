"""Mixture estimands against closed forms (seed 000, Prop. 7): order-matched mixing of
QQ-satisfying agents satisfies QQ, order-dependent selection gives ``q = M1 - M2``, opposite
violations average away with the flag raised, and the aggregate's envelope is exact.

Components are the sim ground-truth agents on the 18 pilot items, analysed through
:func:`analyze_mixture`, or random masses (fixed seeds). Tolerance 1e-12: double-precision
rounding of O(1) quantities.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmaudit.backends.sim import build_sim_agent
from lmaudit.studies.layout import ReportInputs
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.measure import agent_rows
from lmaudit.studies.qq.mixture.analysis import analyze_mixture
from lmaudit.studies.qq.mixture.estimand import (
    check_weights,
    diagnose_item,
    mix_positions,
    mixture_envelope,
    position_weights,
    temper,
)
from lmaudit.studies.qq.mixture.plan import Component
from lmaudit.studies.qq.planning import cells_for
from lmaudit.studies.qq.report.page import render_report
from lmaudit.studies.qq.result import QQParams
from lmaudit.studies.qq.results import QQResults

TOL = 1e-12
REPO = Path(__file__).resolve().parents[3]
PERSONAS = ("none", "iowa-farmer", "chicago-nurse")


@pytest.fixture(scope="module")
def cells() -> list[Any]:
    """The plain cells of the 18 pilot items (Track M with exemplars, both mappings)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=["model=sim_projective", f"study.items.path={REPO / 'data/qq/items/pilot.json'}"],
        )
    return cells_for(cfg)


def mixture(
    cells: list[Any], agents: list[dict[str, Any]], w_ab: list[float], w_ba: list[float], **kw: Any
) -> dict[str, Any]:
    """The mixture results of one sim agent per component (component k measured as persona k)."""
    rows: list[dict[str, Any]] = []
    comps = []
    for k, (agent, a, b) in enumerate(zip(agents, w_ab, w_ba, strict=True)):
        tag = {} if k == 0 else {"persona": PERSONAS[k]}
        rows += agent_rows(cells, build_sim_agent(agent), "logprob", tag)
        comps.append(Component(PERSONAS[k], kw.get("temperature", 1.0), a, b))
    results, _ = analyze_mixture(rows, comps, "logprob", 1.0, QQParams(), "<test>")
    return results.to_json()


def component(results: dict[str, Any], k: int) -> dict[str, dict[str, Any]]:
    return {it["item"]: it for it in results["mixture"]["components"][k]["items"]}


def m_of(joint: dict[str, float]) -> float:
    """Disagreement probability of a 2x2 joint (first, second): yn + ny."""
    return joint["yn"] + joint["ny"]


PROJECTIVE = {"agent": "projective", "seed": 0}
REPETITION = {"agent": "repetition", "r": 0.6, "seed": 1}


def test_order_matched_mixture_of_satisfying_agents_satisfies_qq(cells: list[Any]) -> None:
    res = mixture(cells, [PROJECTIVE, REPETITION], [0.3, 0.7], [0.3, 0.7])
    assert res["n_items"] == 18 and res["mixture"]["order_matched"] is True
    for it in res["items"]:
        assert abs(it["q"]) < TOL, it["item"]
        assert it["verdict"] == "SATISFIED" and it["gamma_class"] == "NONCONTEXTUAL"
    # the aggregate joint of every order is the weighted mixture of the component joints
    comps = [
        {
            (it["item"], m["mapping"], c["order"]): c["joint"]
            for it in r["items"]
            for m in it["mappings"]
            for c in m["cells"]
        }
        for r in (mixture(cells, [PROJECTIVE], [1.0], [1.0]), mixture(cells, [REPETITION], [1.0], [1.0]))
    ]
    for it in res["items"]:
        for m in it["mappings"]:
            for c in m["cells"]:
                key = (it["item"], m["mapping"], c["order"])
                for cell, value in c["joint"].items():
                    assert value == pytest.approx(
                        0.3 * comps[0][key][cell] + 0.7 * comps[1][key][cell], abs=TOL
                    )


@settings(max_examples=20, deadline=None)
@given(st.floats(0.0, 1.0), st.integers(0, 50))
def test_any_order_matched_weights_keep_projective_mixtures_satisfied(
    cells: list[Any], w: float, seed: int
) -> None:
    agents = [{"agent": "projective", "seed": seed}, {"agent": "luders_symmetric", "seed": seed + 1}]
    res = mixture(cells, agents, [w, 1 - w], [w, 1 - w])
    assert max(abs(it["q"]) for it in res["items"]) < TOL


@pytest.mark.parametrize(("w_ab", "w_ba"), [([1.0, 0.0], [0.0, 1.0]), ([0.25, 0.75], [0.6, 0.4])])
def test_order_dependent_selection_gives_the_closed_form(
    cells: list[Any], w_ab: list[float], w_ba: list[float]
) -> None:
    # two projective agents (each q = 0, so M_AB = M_BA per component) with different states
    one = {"agent": "projective", "seed": 3}
    two = {"agent": "projective", "seed": 4}
    res = mixture(cells, [one, two], w_ab, w_ba)
    assert res["mixture"]["order_matched"] is False
    singles = [mixture(cells, [a], [1.0], [1.0]) for a in (one, two)]
    differ = 0
    for it in res["items"]:
        for m in it["mappings"]:
            ms = []
            for s in singles:
                sm = next(
                    x
                    for x in next(y for y in s["items"] if y["item"] == it["item"])["mappings"]
                    if x["mapping"] == m["mapping"]
                )
                ms.append({c["order"]: m_of(c["joint"]) for c in sm["cells"]})
            expected = sum(w * k["AB"] for w, k in zip(w_ab, ms, strict=True)) - sum(
                w * k["BA"] for w, k in zip(w_ba, ms, strict=True)
            )
            assert m["q"] == pytest.approx(expected, abs=TOL), (it["item"], m["mapping"])
            if w_ab == [1.0, 0.0]:  # Prop. 7's example: q = M1 - M2 exactly
                assert m["q"] == pytest.approx(ms[0]["AB"] - ms[1]["BA"], abs=TOL)
            differ += abs(expected) > 0.05
    assert differ >= 5  # the channel is real: order-dependent selection violates QQ


def test_opposite_violations_average_away_with_the_flag_raised(cells: list[Any]) -> None:
    # Prop. 5 with position-invariant retention: q = (r[n] - r[y]) (u - v), one sign each
    down = {
        "agent": "mixture_repetition",
        "r_ab_y": 0.8,
        "r_ab_n": 0.2,
        "r_ba_y": 0.8,
        "r_ba_n": 0.2,
        "seed": 0,
    }
    up = {
        "agent": "mixture_repetition",
        "r_ab_y": 0.2,
        "r_ab_n": 0.8,
        "r_ba_y": 0.2,
        "r_ba_n": 0.8,
        "seed": 0,
    }
    res = mixture(cells, [down, up], [0.5, 0.5], [0.5, 0.5])
    first, second = component(res, 0), component(res, 1)
    diags = {d["item"]: d for d in res["mixture"]["items"]}
    away = 0
    for it in res["items"]:
        iid = it["item"]
        u, v = it["u"], it["v"]  # the components share u and v (same seed), so does the mixture
        assert first[iid]["q"] == pytest.approx(-0.6 * (u - v), abs=TOL)
        assert second[iid]["q"] == pytest.approx(0.6 * (u - v), abs=TOL)
        assert abs(it["q"]) < TOL and it["verdict"] == "SATISFIED"
        both = 0.6 * abs(u - v) > 0.02 + 1e-9
        assert diags[iid]["averaged_away"] is both
        assert diags[iid]["violating_components"] == (["none/T1", "iowa-farmer/T1"] if both else [])
        assert diags[iid]["q_spread"]["range"] == pytest.approx(1.2 * abs(u - v), abs=TOL)
        away += both
    assert away >= 5 and res["mixture"]["counts"]["averaged_away"] == away
    page = render_report(ReportInputs(QQResults.from_json(res)))
    assert f"The mixture averages away QQ violations on {away} items" in page


def test_the_aggregate_envelope_carries_every_components_mass(cells: list[Any]) -> None:
    leaky = [{**PROJECTIVE, "other_mass": 0.05}, {**REPETITION, "other_mass": 0.2}]
    res = mixture(cells, leaky, [0.4, 0.6], [0.4, 0.6])
    first, second = component(res, 0), component(res, 1)
    for it in res["items"]:
        w1, w2 = (np.diff(first[it["item"]]["q_env"])[0], np.diff(second[it["item"]]["q_env"])[0])
        assert it["envelope_width"] == pytest.approx(0.4 * w1 + 0.6 * w2, abs=TOL)
        assert it["envelope_width"] > 0.01
    assert res["mass"]["max_other"] == pytest.approx(0.2, abs=1e-9)  # every component's positions


def test_tempered_component_is_the_sigmoid_of_the_scaled_logit(cells: list[Any]) -> None:
    plain = mixture(cells, [REPETITION], [1.0], [1.0])
    hot = mixture(cells, [REPETITION], [1.0], [1.0], temperature=2.5)
    for a, b in zip(plain["items"], hot["items"], strict=True):
        for ma, mb in zip(a["mappings"], b["mappings"], strict=True):
            for ca, cb in zip(ma["cells"], mb["cells"], strict=True):
                for pa, pb in zip(ca["positions"], cb["positions"], strict=True):
                    logit = np.log(pa["p"]) - np.log(1 - pa["p"])
                    assert pb["p"] == pytest.approx(1 / (1 + np.exp(-logit / 2.5)), abs=TOL)


# ---------------------------------------------------------------- the pure maths


def _joints_direct(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(joint_AB, joint_BA), [first, second], 0 = y, by explicit products."""
    jab = np.stack(
        [np.stack([x[..., 0] * x[..., 1], x[..., 0] * (1 - x[..., 1])], -1),
         np.stack([(1 - x[..., 0]) * x[..., 2], (1 - x[..., 0]) * (1 - x[..., 2])], -1)], -2,
    )  # fmt: skip
    jba = np.stack(
        [np.stack([x[..., 3] * x[..., 4], x[..., 3] * (1 - x[..., 4])], -1),
         np.stack([(1 - x[..., 3]) * x[..., 5], (1 - x[..., 3]) * (1 - x[..., 5])], -1)], -2,
    )  # fmt: skip
    return jab, jba


def _stats_of_joints(jab: np.ndarray, jba: np.ndarray) -> np.ndarray:
    """(q, OE_A, OE_B) of a joint pair (BA joints are [B answer, A answer])."""
    q = (jab[..., 0, 1] + jab[..., 1, 0]) - (jba[..., 0, 1] + jba[..., 1, 0])
    oe_a = (jba[..., 0, 0] + jba[..., 1, 0]) - (jab[..., 0, 0] + jab[..., 0, 1])
    oe_b = (jab[..., 0, 0] + jab[..., 1, 0]) - (jba[..., 0, 0] + jba[..., 0, 1])
    return np.stack([q, oe_a, oe_b], -1)


def _masses(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    raw = rng.dirichlet([1.0, 1.0, 0.3], size=shape)
    return raw[..., 0], raw[..., 1], raw[..., 2]


def test_mixed_positions_are_the_conditionals_of_the_mixed_joints() -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(size=(4, 50, 6))
    w_ab, w_ba = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    agg = mix_positions(x, position_weights(x, w_ab, w_ba))
    jab, jba = _joints_direct(x)
    got_ab, got_ba = _joints_direct(agg)
    np.testing.assert_allclose(got_ab, np.einsum("k,k...->...", w_ab, jab), atol=1e-15)
    np.testing.assert_allclose(got_ba, np.einsum("k,k...->...", w_ba, jba), atol=1e-15)
    q, oe_a, oe_b = env.qq_statistics(agg)
    np.testing.assert_allclose(np.stack([q, oe_a, oe_b], -1), _stats_of_joints(got_ab, got_ba), atol=TOL)


@pytest.mark.parametrize("matched", [True, False])
def test_mixture_envelope_is_exact_by_brute_force(matched: bool) -> None:
    rng = np.random.default_rng(11 + matched)
    k, rows = 2, 6
    p_y, p_n, other = _masses(rng, (k, rows, 6))
    w_ab = rng.dirichlet(np.ones(k))
    w_ba = w_ab if matched else rng.dirichlet(np.ones(k))
    box = mixture_envelope(p_y, p_n, other, w_ab, w_ba)
    # every allocation of every component's twelve positions' unassigned mass: 2^12 vertices
    t = np.array(list(itertools.product((0.0, 1.0), repeat=k * 6))).reshape(-1, k, 1, 6)
    x = env.allocate(p_y, p_n, other, t)  # (V, K, R, 6)
    jab, jba = _joints_direct(x)
    stats = _stats_of_joints(np.einsum("k,vk...->v...", w_ab, jab), np.einsum("k,vk...->v...", w_ba, jba))
    lo, hi = stats.min(axis=0), stats.max(axis=0)
    got_lo = np.stack([box.q_lo, box.oe_a_lo, box.oe_b_lo], -1)
    got_hi = np.stack([box.q_hi, box.oe_a_hi, box.oe_b_hi], -1)
    np.testing.assert_allclose(got_lo, lo, atol=TOL)
    np.testing.assert_allclose(got_hi, hi, atol=TOL)
    if matched:  # order-matched: the weighted mean of the components' own envelopes
        own = env.envelope(p_y, p_n, other)
        for f in ("q_lo", "q_hi", "oe_a_lo", "oe_a_hi", "oe_b_lo", "oe_b_hi"):
            np.testing.assert_allclose(getattr(box, f), np.einsum("k,kr->r", w_ab, getattr(own, f)), atol=TOL)


def test_temper_closed_forms() -> None:
    p_y, p_n = np.array([0.9, 0.3, 0.0, 1e-30]), np.array([0.05, 0.6, 0.4, 0.5])
    same = temper(p_y, p_n, 1.0)
    assert np.array_equal(same[0], p_y) and np.array_equal(same[1], p_n)  # T = 1: the forward pass itself
    ty, tn = temper(p_y, p_n, 2.0)
    np.testing.assert_allclose(ty + tn, p_y + p_n, rtol=1e-15)
    # sigmoid(log(18) / 2) = sqrt(18) / (sqrt(18) + 1); sigmoid(log(0.5) / 2) = 1 / (1 + sqrt(2))
    np.testing.assert_allclose(
        ty / (ty + tn),
        [18**0.5 / (18**0.5 + 1), 1 / (1 + 2**0.5), 0.0, 1e-15 / (1e-15 + 0.5**0.5)],
        rtol=1e-12,
        atol=0,
    )
    cold_y, cold_n = temper(0.6, 0.2, 0.5)  # T = 1/2 squares the odds: 3 -> 9
    assert float(cold_y / cold_n) == pytest.approx(9.0, rel=1e-14)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        temper(0.5, 0.5, -1.0)


def test_weights_are_checked() -> None:
    check_weights([0.5, 0.5], [1.0, 0.0])
    with pytest.raises(ValueError, match=r"w_AB sum to 0\.9"):
        check_weights([0.5, 0.4], [0.5, 0.5])
    with pytest.raises(ValueError, match="w_BA must be a non-empty vector of numbers >= 0"):
        check_weights([0.5, 0.5], [1.5, -0.5])


def test_diagnose_item_counts_and_spread() -> None:
    def r(verdict: str, q: float, saturated: bool, gamma: str = "NONCONTEXTUAL") -> Any:
        return SimpleNamespace(verdict=verdict, q=q, saturated=saturated, gamma_class=gamma)

    comps = [
        ("a", 0.25, r("VIOLATED", 0.3, True)),
        ("b", 0.25, r("VIOLATED", -0.3, True)),
        ("c", 0.5, r("SATISFIED", 0.0, False)),
    ]
    d = diagnose_item("x", r("SATISFIED", 0.0, False), comps, plain=r("VIOLATED", 0.1, True))
    assert d.averaged_away and d.violating_components == ("a", "b")
    assert d.component_verdicts == {"SATISFIED": 1, "VIOLATED": 2, "INDETERMINATE": 0}
    assert (d.q_spread.min, d.q_spread.max, d.q_spread.range) == (-0.3, 0.3, 0.6)
    assert d.q_spread.sd == pytest.approx((0.25 * 0.09 * 2) ** 0.5, abs=TOL)
    assert d.saturated.components == 2 and d.dispersion_restored is True
    kept = diagnose_item("x", r("INDETERMINATE", 0.0, True), comps, plain=None)
    assert not kept.averaged_away and kept.dispersion_restored is None
