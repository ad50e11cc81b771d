"""The QQ ground-truth agents of the ``sim`` backend against closed forms (seed 000, section 3,
appendix A) and an independent qubit implementation. q is computed here in a few lines from
the agents' label read-outs, never through the analysis code."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import sqrtm
from scipy.stats import binom

from lmaudit.backends.base import LabelBackend, LabelRequest, SampleRequest, SamplingBackend, identity_digest
from lmaudit.backends.sim import OTHER_TOKEN, SIM_AGENTS, build_sim_agent
from lmaudit.errors import BackendError
from lmaudit.studies.qq.records import request_meta

LABEL_OF = {
    "map1": {"y": "A", "n": "B"},
    "map2": {"y": "B", "n": "A"},
    "yesno": {"y": "Yes", "n": "No"},
}
MSG = ({"role": "user", "content": "q"},)
# (order, position, question, first_answer) for the six positions of one (item, mapping)
POSITIONS = [
    (order, pos, order[pos - 1], fa) for order in ("AB", "BA") for pos, fa in ((1, None), (2, "y"), (2, "n"))
]


def meta(item: str, mapping: str, order: str, position: int, question: str, fa: str | None) -> dict[str, Any]:
    return request_meta(
        item=item,
        mapping=mapping,
        order=order,
        position=position,
        question=question,
        first_answer=fa,
        label_of=LABEL_OF[mapping],
    )


def label_requests(items: list[str], mapping: str) -> list[LabelRequest]:
    labels = tuple(sorted(LABEL_OF[mapping].values()))
    return [LabelRequest(MSG, labels, meta(it, mapping, *p)) for it in items for p in POSITIONS]


def behaviour(agent: Any, items: list[str], mapping: str = "map1") -> np.ndarray:
    """Per item: [u, K_AB(y|y), K_AB(y|n), v, K_BA(y|y), K_BA(y|n)] from the binary-conditioned
    label read-out, in semantic coordinates."""
    lo = LABEL_OF[mapping]
    res = agent.label_logprobs(label_requests(items, mapping))
    p = [r.probs[lo["y"]] / (r.probs[lo["y"]] + r.probs[lo["n"]]) for r in res]
    return np.array(p).reshape(len(items), 6)


def audit(b: np.ndarray) -> dict[str, np.ndarray]:
    """q, order effects and mismatch rates from behaviour rows (seed eq. 1, 5)."""
    u, ab_y, ab_n, v, ba_y, ba_n = b.T
    m_ab = u * (1 - ab_y) + (1 - u) * ab_n
    m_ba = v * (1 - ba_y) + (1 - v) * ba_n
    return {
        "u": u,
        "v": v,
        "q": m_ab - m_ba,
        "oe_a": (v * ba_y + (1 - v) * ba_n) - u,
        "oe_b": (u * ab_y + (1 - u) * ab_n) - v,
        "a": 1 - ab_y,
        "b": ab_n,
        "c": 1 - ba_y,
        "d": ba_n,
    }


ITEMS = [f"it-{k}" for k in range(1000)]


# ----------------------------------------------------------------------------- projective


def bloch(theta: float, phi: float) -> np.ndarray:
    return np.array([math.sin(theta) * math.cos(phi), math.sin(theta) * math.sin(phi), math.cos(theta)])


def test_projective_qq_holds_over_1000_items_and_matches_closed_forms() -> None:
    agent = build_sim_agent({"agent": "projective", "seed": 7})
    out = audit(behaviour(agent, ITEMS))
    assert np.max(np.abs(out["q"])) < 1e-12
    # a = b = c = d = |<A_y|B_n>|^2 = (1 - a.b)/2 at every item; marginals (1 + s.a)/2
    for key in "bcd":
        np.testing.assert_allclose(out[key], out["a"], atol=1e-12)
    params = [agent.item_params(it) for it in ITEMS]
    s = np.array([bloch(*p["state"]) for p in params])
    a = np.array([bloch(*p["axis_A"]) for p in params])
    b = np.array([bloch(*p["axis_B"]) for p in params])
    np.testing.assert_allclose(out["a"], (1 - np.sum(a * b, axis=1)) / 2, atol=1e-12)
    np.testing.assert_allclose(out["u"], (1 + np.sum(s * a, axis=1)) / 2, atol=1e-12)
    np.testing.assert_allclose(out["v"], (1 + np.sum(s * b, axis=1)) / 2, atol=1e-12)
    assert np.all((out["u"] >= 0.1) & (out["u"] <= 0.9) & (out["v"] >= 0.1) & (out["v"] <= 0.9))
    assert np.max(np.abs(out["oe_a"]) + np.abs(out["oe_b"])) > 0.1  # order effects are present


def test_projective_is_the_same_under_every_label_mapping() -> None:
    agent = build_sim_agent({"agent": "projective", "seed": 3, "purity": 0.8})
    b1 = behaviour(agent, ITEMS[:50], "map1")
    np.testing.assert_array_equal(b1, behaviour(agent, ITEMS[:50], "map2"))
    np.testing.assert_array_equal(b1, behaviour(agent, ITEMS[:50], "yesno"))


angle = st.floats(0.0, 2 * math.pi)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(angle, min_size=6, max_size=6),
    st.floats(0.05, 1.0),
    st.sampled_from(["projective", "luders_symmetric"]),
    st.floats(0.0, 1.0),
)
def test_qq_holds_for_every_projective_and_symmetric_luders_agent(
    angles: list[float], purity: float, name: str, eta: float
) -> None:
    over = {"state": angles[0:2], "axis_A": angles[2:4], "axis_B": angles[4:6]}
    cfg: dict[str, Any] = {"agent": name, "purity": purity, "items": {"x": over}}
    if name == "luders_symmetric":
        cfg["eta"] = eta
    out = audit(behaviour(build_sim_agent(cfg), ["x"]))
    assert abs(out["q"][0]) < 1e-12


# ----------------------------------------------------------------------------- repetition


@pytest.mark.parametrize("r", [0.0, 0.3, 0.85, 1.0])
def test_repetition_satisfies_qq_with_order_effects_r_times_u_minus_v(r: float) -> None:
    agent = build_sim_agent({"agent": "repetition", "r": r, "seed": 11})
    out = audit(behaviour(agent, ITEMS[:300], "map2"))
    assert np.max(np.abs(out["q"])) < 1e-12
    np.testing.assert_allclose(out["oe_b"], r * (out["u"] - out["v"]), atol=1e-12)
    np.testing.assert_allclose(out["oe_a"], r * (out["v"] - out["u"]), atol=1e-12)
    np.testing.assert_allclose(out["a"], (1 - r) * (1 - out["v"]), atol=1e-12)  # Prop. 4 mismatch
    np.testing.assert_allclose(out["b"], (1 - r) * out["v"], atol=1e-12)
    assert np.all((out["u"] >= 0.1) & (out["u"] <= 0.9) & (out["v"] >= 0.1) & (out["v"] <= 0.9))


def test_mixture_repetition_matches_closed_form_eq3() -> None:
    rng = np.random.default_rng(2024)
    for trial in range(20):
        ab_y, ab_n, ba_y, ba_n = rng.random(4)
        if trial % 5 == 0:  # cross-polarity position symmetry: QQ holds
            ba_n, ba_y = ab_y, ab_n
        cfg = {
            "agent": "mixture_repetition",
            "seed": trial,
            "r_AB": {"y": ab_y, "n": ab_n},
            "r_BA": {"y": ba_y, "n": ba_n},
        }
        out = audit(behaviour(build_sim_agent(cfg), ITEMS[:50], "yesno"))
        u, v = out["u"], out["v"]
        closed = u * (1 - v) * (ba_n - ab_y) + (1 - u) * v * (ba_y - ab_n)
        np.testing.assert_allclose(out["q"], closed, atol=1e-12)
        if trial % 5 == 0:
            assert np.max(np.abs(out["q"])) < 1e-12
        else:
            assert np.max(np.abs(out["q"])) > 1e-3


def test_mixture_accepts_flat_and_nested_rates_with_one_identity() -> None:
    flat = build_sim_agent({"agent": "mixture_repetition", "r_ab_y": 0.8, "r_ab_n": 0.2, "r_ba_y": 0.8})
    nested = build_sim_agent(
        {"agent": "mixture_repetition", "r_AB": {"y": 0.8, "n": 0.2}, "r_BA": {"y": 0.8}}
    )
    assert flat.identity == nested.identity
    out = audit(behaviour(flat, ITEMS[:50]))
    np.testing.assert_allclose(
        out["q"], (0.2 - 0.8) * (out["u"] - out["v"]), atol=1e-12
    )  # polarity-dependent


def test_repetition_item_overrides() -> None:
    agent = build_sim_agent({"agent": "repetition", "r": 0.4, "items": {"s1-01": {"u": 0.95, "v": 0.02}}})
    out = audit(behaviour(agent, ["s1-01"]))
    assert out["u"][0] == pytest.approx(0.95, abs=1e-15)
    assert out["v"][0] == pytest.approx(0.02, abs=1e-15)
    assert out["oe_b"][0] == pytest.approx(0.4 * 0.93, abs=1e-12)


# ----------------------------------------------------------------------------- Lüders


def lueders_reference(rho: np.ndarray, axis: np.ndarray, eta_y: float, eta_n: float) -> dict[str, np.ndarray]:
    """Independent Kraus operators: matrix square roots of the effects (scipy.linalg.sqrtm)."""
    sig = [np.array([[0, 1], [1, 0]]), np.array([[0, -1j], [1j, 0]]), np.array([[1, 0], [0, -1]])]
    p_y = (np.eye(2) + sum(x * s for x, s in zip(axis, sig, strict=True))) / 2
    e_y = (1 + eta_y) / 2 * p_y + (1 - eta_n) / 2 * (np.eye(2) - p_y)
    return {"y": sqrtm(e_y), "n": sqrtm(np.eye(2) - e_y)}


def reference_behaviour(agent: Any, item: str, etas: tuple[float, ...], purity: float) -> np.ndarray:
    p = agent.item_params(item)
    s, a, b = bloch(*p["state"]), bloch(*p["axis_A"]), bloch(*p["axis_B"])
    sig = [np.array([[0, 1], [1, 0]]), np.array([[0, -1j], [1j, 0]]), np.array([[1, 0], [0, -1]])]
    rho = (np.eye(2) + purity * sum(x * m for x, m in zip(s, sig, strict=True))) / 2
    ka, kb = lueders_reference(rho, a, etas[0], etas[1]), lueders_reference(rho, b, etas[2], etas[3])

    def seq(k1: dict[str, np.ndarray], k2: dict[str, np.ndarray], first: str | None) -> float:
        r = rho if first is None else k1[first] @ rho @ k1[first].conj().T
        r = r / np.trace(r)
        return float(np.trace(k2["y"] @ r @ k2["y"].conj().T).real)

    return np.array([seq(kb, ka, None), seq(ka, kb, "y"), seq(ka, kb, "n"),
                     seq(ka, kb, None), seq(kb, ka, "y"), seq(kb, ka, "n")])  # fmt: skip


def test_luders_symmetric_preserves_qq_over_many_random_configs() -> None:
    rng = np.random.default_rng(5)
    worst = 0.0
    for trial in range(40):
        eta, purity = float(rng.random()), float(rng.uniform(0.05, 1.0))
        agent = build_sim_agent({"agent": "luders_symmetric", "seed": trial, "eta": eta, "purity": purity})
        items = ITEMS[:25]
        out = audit(behaviour(agent, items))
        worst = max(worst, float(np.max(np.abs(out["q"]))))
        # closed form: M_AB = M_BA = (1 - eta^2 a.b)/2, whatever the state
        ab = np.array([bloch(*agent.item_params(i)["axis_A"]) @ bloch(*agent.item_params(i)["axis_B"])
                       for i in items])  # fmt: skip
        m_ab = out["u"] * out["a"] + (1 - out["u"]) * out["b"]
        np.testing.assert_allclose(m_ab, (1 - eta**2 * ab) / 2, atol=1e-12)
    assert worst < 1e-12


def test_luders_symmetric_at_eta_one_is_projective() -> None:
    proj = build_sim_agent({"agent": "projective", "seed": 9})
    lud = build_sim_agent({"agent": "luders_symmetric", "seed": 9, "eta": 1.0})
    np.testing.assert_allclose(behaviour(proj, ITEMS[:100]), behaviour(lud, ITEMS[:100]), atol=1e-14)


def test_luders_asymmetric_violates_qq_in_some_configs_and_matches_reference() -> None:
    rng = np.random.default_rng(17)
    violating = 0
    for trial in range(20):
        etas = tuple(float(x) for x in rng.random(4))
        purity = float(rng.uniform(0.5, 1.0))
        cfg = dict(zip(("eta_a_y", "eta_a_n", "eta_b_y", "eta_b_n"), etas, strict=True))
        agent = build_sim_agent({"agent": "luders_asymmetric", "seed": trial, "purity": purity, **cfg})
        items = ITEMS[:10]
        b = behaviour(agent, items)
        ref = np.array([reference_behaviour(agent, i, etas, purity) for i in items])
        np.testing.assert_allclose(b, ref, atol=1e-10)
        if np.max(np.abs(audit(b)["q"])) > 1e-3:
            violating += 1
    assert violating >= 7  # observed: every random config violates at some item


def test_luders_asymmetric_default_violates_and_per_question_only_asymmetry_does_not() -> None:
    default = audit(behaviour(build_sim_agent({"agent": "luders_asymmetric"}), ITEMS[:200]))
    assert np.max(np.abs(default["q"])) > 1e-2
    per_question = build_sim_agent(
        {"agent": "luders_asymmetric", "eta_a_y": 0.9, "eta_a_n": 0.9, "eta_b_y": 0.3, "eta_b_n": 0.3}
    )
    assert np.max(np.abs(audit(behaviour(per_question, ITEMS[:200]))["q"])) < 1e-12


# ----------------------------------------------------------------------------- read-out


def test_label_readout_other_mass_top_k_and_token_ids() -> None:
    agent = build_sim_agent({"agent": "repetition", "other_mass": 0.25, "items": {"i": {"u": 0.2, "v": 0.5}}})
    [res] = agent.label_logprobs([LabelRequest(MSG, ("A", "B"), meta("i", "map2", "AB", 1, "A", None))])
    assert res.probs == pytest.approx({"B": 0.75 * 0.2, "A": 0.75 * 0.8}, abs=1e-15)
    assert res.other == 0.25
    assert [t for t, _ in res.top_k] == ["A", OTHER_TOKEN, "B"]
    assert res.label_token_ids == {"A": 0, "B": 1}
    assert agent.check_single_token(LabelRequest(MSG, ("Yes", "No"))) == {"Yes": ["Yes"], "No": ["No"]}
    [short] = agent.label_logprobs([LabelRequest(MSG, ("A", "B"), meta("i", "map2", "AB", 1, "A", None))], 1)
    assert short.top_k == [("A", pytest.approx(0.6))]


def test_label_bias_shifts_mass_toward_label_a_only_for_ab_labels() -> None:
    plain = build_sim_agent({"agent": "projective", "seed": 1})
    biased = build_sim_agent({"agent": "projective", "seed": 1, "label_bias": 1.0})
    for mapping in ("map1", "map2"):
        p0 = plain.label_logprobs(label_requests(ITEMS[:20], mapping))
        p1 = biased.label_logprobs(label_requests(ITEMS[:20], mapping))
        for r0, r1 in zip(p0, p1, strict=True):
            pa = r0.probs["A"]
            assert r1.probs["A"] == pytest.approx(pa * math.e / (pa * math.e + 1 - pa), abs=1e-12)
    assert (
        np.max(np.abs(behaviour(biased, ITEMS[:20], "map1") - behaviour(biased, ITEMS[:20], "map2"))) > 0.05
    )
    np.testing.assert_array_equal(
        behaviour(plain, ITEMS[:20], "yesno"), behaviour(biased, ITEMS[:20], "yesno")
    )


def test_both_contracts_are_satisfied() -> None:
    for name in SIM_AGENTS:
        agent = build_sim_agent({"agent": name})
        assert isinstance(agent, LabelBackend)
        assert isinstance(agent, SamplingBackend)
        assert agent.reads_meta is True


@pytest.mark.parametrize(
    ("bad_meta", "match"),
    [
        ({}, "no QQ meta"),
        ({"item": "x", "order": "AB", "position": 1, "question": "A"}, "label_of"),
        ({**meta("x", "map1", "AB", 1, "A", None), "question": "B"}, "expected 'A'"),
        ({**meta("x", "map1", "AB", 2, "B", None)}, "first_answer"),
        ({**meta("x", "map1", "AB", 1, "A", "y")}, "first_answer"),
        ({**meta("x", "map1", "BA", 3, "A", None)}, "position"),
        ({**meta("x", "map1", "AB", 1, "A", None), "label_of": {"y": "A", "n": "A"}}, "label_of"),
    ],
)
def test_bad_meta_raises_backend_error(bad_meta: dict[str, Any], match: str) -> None:
    agent = build_sim_agent({"agent": "projective"})
    with pytest.raises(BackendError, match=match):
        agent.label_logprobs([LabelRequest(MSG, ("A", "B"), bad_meta)])
    with pytest.raises(BackendError, match=match):
        agent.sample([SampleRequest(MSG, n=1, meta=bad_meta)])


def test_labels_must_match_label_of() -> None:
    agent = build_sim_agent({"agent": "projective"})
    with pytest.raises(BackendError, match="do not match"):
        agent.label_logprobs([LabelRequest(MSG, ("Yes", "No"), meta("x", "map1", "AB", 1, "A", None))])


# ----------------------------------------------------------------------------- sampling


def tempered(p: float, t: float) -> float:
    if t == 0:
        return 1.0 if p > 0.5 else 0.0
    return p ** (1 / t) / (p ** (1 / t) + (1 - p) ** (1 / t))


@pytest.mark.parametrize(("temperature", "other_mass"), [(1.0, 0.0), (1.0, 0.2), (0.5, 0.1), (2.0, 0.0)])
def test_sampling_frequencies_match_label_probabilities(temperature: float, other_mass: float) -> None:
    agent = build_sim_agent({"agent": "luders_asymmetric", "seed": 4, "other_mass": other_mass})
    n = 1000
    offset = int(10 * temperature + 10 * other_mass) % 2
    for k, (order, pos, question, fa) in enumerate(POSITIONS[offset::2]):
        m = meta(f"it-{k}", "map2", order, pos, question, fa)
        [lr] = agent.label_logprobs([LabelRequest(MSG, ("A", "B"), m)])
        p_y = lr.probs["B"] / (lr.probs["A"] + lr.probs["B"])
        [res] = agent.sample([SampleRequest(MSG, n=n, temperature=temperature, seed=100 + k, meta=m)])
        assert len(res.texts) == n and set(res.texts) <= {"A", "B", OTHER_TOKEN}
        expected = {
            "B": (1 - other_mass) * tempered(p_y, temperature),
            "A": (1 - other_mass) * (1 - tempered(p_y, temperature)),
            OTHER_TOKEN: other_mass,
        }
        for text, p in expected.items():
            lo, hi = binom.interval(1 - 1e-6, n, p)
            assert lo <= res.texts.count(text) <= hi, (text, p, res.texts.count(text))


def test_greedy_and_nucleus_sampling() -> None:
    agent = build_sim_agent({"agent": "repetition", "other_mass": 0.1, "items": {"i": {"u": 0.3, "v": 0.5}}})
    m = meta("i", "map1", "AB", 1, "A", None)  # P(y) = 0.3 -> label "A" 0.27, "B" 0.63, other 0.1
    [greedy] = agent.sample([SampleRequest(MSG, n=200, temperature=0.0, meta=m)])
    assert set(greedy.texts) <= {"B", OTHER_TOKEN} and greedy.texts.count(OTHER_TOKEN) > 0
    [nuc] = agent.sample([SampleRequest(MSG, n=200, top_p=0.6, meta=m)])
    assert set(nuc.texts) == {"B"}
    with pytest.raises(BackendError, match="temperature"):
        agent.sample([SampleRequest(MSG, n=1, temperature=-1.0, meta=m)])


def test_draw_i_does_not_depend_on_n_and_is_reproducible() -> None:
    agent = build_sim_agent({"agent": "projective", "seed": 2, "other_mass": 0.1})
    m = meta("it-1", "map1", "BA", 2, "A", "n")
    [r10, r100] = agent.sample(
        [SampleRequest(MSG, n=10, seed=5, meta=m), SampleRequest(MSG, n=100, seed=5, meta=m)]
    )
    assert r100.texts[:10] == r10.texts
    again = build_sim_agent({"agent": "projective", "seed": 2, "other_mass": 0.1})
    assert again.sample([SampleRequest(MSG, n=100, seed=5, meta=m)])[0].texts == r100.texts
    other_seed = agent.sample([SampleRequest(MSG, n=100, seed=6, meta=m)])[0].texts
    assert other_seed != r100.texts
    assert agent.sample([SampleRequest(MSG, n=0, meta=m)])[0].texts == []


# ----------------------------------------------------------------------------- identity and factory

BASE = {
    "projective": {"purity": 0.5},
    "luders_symmetric": {"eta": 0.2},
    "luders_asymmetric": {"eta_b_n": 0.1},
    "repetition": {"r": 0.9},
    "mixture_repetition": {"r_ba_y": 0.1},
}


@pytest.mark.parametrize("name", sorted(SIM_AGENTS))
def test_identity_changes_with_every_parameter(name: str) -> None:
    base = build_sim_agent({"agent": name})
    ident = base.identity
    assert ident["backend"] == "sim" and ident["agent"] == name and "version" in ident and "seed" in ident
    assert identity_digest(build_sim_agent({"agent": name}).identity) == identity_digest(ident)
    variants = [
        {"seed": 1},
        {"other_mass": 0.1},
        {"label_bias": 0.5},
        {"marginal_range": [0.2, 0.8]},
        {"items": {"x": {"u": 0.5} if "repetition" in name else {"state": [0.1, 0.2]}}},
        BASE[name],
    ]
    digests = {identity_digest(build_sim_agent({"agent": name, **v}).identity) for v in variants}
    assert len(digests | {identity_digest(ident)}) == len(variants) + 1
    other_names = {identity_digest(build_sim_agent({"agent": n}).identity) for n in SIM_AGENTS}
    assert len(other_names) == len(SIM_AGENTS)


def test_item_parameters_are_deterministic_per_seed_and_item() -> None:
    a = build_sim_agent({"agent": "projective", "seed": 0})
    b = build_sim_agent({"agent": "projective", "seed": 0})
    c = build_sim_agent({"agent": "projective", "seed": 1})
    assert a.item_params("s1-01") == b.item_params("s1-01")
    assert a.item_params("s1-01") != a.item_params("s1-02")
    assert a.item_params("s1-01") != c.item_params("s1-01")


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        ({"seed": 0}, "'agent'"),
        ({"agent": "quantum"}, "'agent' = 'quantum' is unknown"),
        ({"agent": "projective", "eta": 0.5}, "unknown field.*eta"),
        ({"agent": "projective", "other_mass": 1.0}, "other_mass"),
        ({"agent": "projective", "seed": -1}, "seed"),
        ({"agent": "projective", "seed": True}, "seed"),
        ({"agent": "projective", "purity": 1.5}, "purity"),
        ({"agent": "projective", "marginal_range": [0.9, 0.1]}, "marginal_range"),
        ({"agent": "projective", "items": {"x": {"u": 0.5}}}, "items\\['x'\\]"),
        ({"agent": "projective", "items": {"x": {"state": [0.1]}}}, "items\\['x'\\].state"),
        ({"agent": "repetition", "r": 1.2}, "'r'"),
        ({"agent": "repetition", "items": {"x": {"u": 2}}}, "items\\['x'\\].u"),
        ({"agent": "mixture_repetition", "r_AB": {"x": 0.5}}, "r_AB"),
        ({"agent": "mixture_repetition", "r_AB": {"y": 0.5}, "r_ab_y": 0.5}, "twice"),
        ({"agent": "mixture_repetition", "r_BA": {"y": 0.5, "n": "x"}}, "r_ba_n"),
        ({"agent": "luders_symmetric", "eta": float("nan")}, "eta"),
        ({"agent": "luders_asymmetric", "eta_a_n": -0.1}, "eta_a_n"),
        ({"agent": "projective", "backend": "hf"}, "backend"),
    ],
)
def test_factory_rejects_bad_configs_naming_the_field(cfg: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_sim_agent(cfg)


def test_infeasible_marginal_range_is_reported_per_item() -> None:
    agent = build_sim_agent({"agent": "luders_symmetric", "eta": 0.1, "marginal_range": [0.9, 1.0]})
    with pytest.raises(BackendError, match="marginal_range"):
        agent.kernel("x")
