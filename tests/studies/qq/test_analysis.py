"""QQ analysis: envelope properties, decisions on hand-built records, pooling, diagnostics.

Tolerances: 1e-12 for identities of O(1) double-precision quantities; envelope containment
is checked with a 1e-12 slack for rounding. Random inputs use fixed seeds; hypothesis
searches the envelope invariants.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq import theory as th
from lmaudit.studies.qq.diagnostics import (
    discriminant_fits,
    g3_check,
    is_saturated,
    memorization_alert,
)
from lmaudit.studies.qq.estimation import QQParams, analyze
from lmaudit.studies.qq.records import Measurement

TOL = 1e-12
LABELS = {"map1": {"y": "A", "n": "B"}, "map2": {"y": "B", "n": "A"}, "yesno": {"y": "Yes", "n": "No"}}
QUESTION = {("AB", 1): "A", ("AB", 2): "B", ("BA", 1): "B", ("BA", 2): "A"}


def raw_records(
    item: str,
    p_y: Sequence[float],
    p_n: Sequence[float],
    *,
    mapping: str = "map1",
    stratum: str = "S1",
) -> list[Measurement]:
    """The six records of one (item, mapping) from raw semantic label masses."""
    label_of = LABELS[mapping]
    out = []
    for (order, pos, first), py, pn in zip(env.POSITIONS, p_y, p_n, strict=True):
        out.append(
            Measurement(
                item=item,
                stratum=stratum,
                mapping=mapping,
                order=order,
                position=pos,
                question=QUESTION[(order, pos)],
                first_answer=first,
                label_of=label_of,
                probs={label_of["y"]: float(py), label_of["n"]: float(pn)},
                other=max(0.0, 1.0 - float(py) - float(pn)),
            )
        )
    return out


def records(
    item: str,
    x: Sequence[float],
    other: float | Sequence[float] = 0.0,
    *,
    mapping: str = "map1",
    stratum: str = "S1",
) -> list[Measurement]:
    """Records whose binary-conditioned P(y) is ``x`` (six values) with ``other`` mass."""
    xa = np.asarray(x, dtype=float)
    o = np.broadcast_to(np.asarray(other, dtype=float), (6,))
    return raw_records(item, xa * (1 - o), (1 - xa) * (1 - o), mapping=mapping, stratum=stratum)


def kernel_x(k: th.SequentialKernels, i: int | None = None) -> list[float]:
    pp = k.position_probs()
    return [float(pp[key] if i is None else pp[key][i]) for key in env.POSITIONS]


# ---------------------------------------------------------------- theory through the analysis


def test_theorem2_through_analyze() -> None:
    """Projective agents: the analysis gives q = 0 and agrees with theory to 1e-12."""
    rng = np.random.default_rng(11)
    n = 600
    psi, a_y, b_y = (rng.normal(size=(n, 2)) + 1j * rng.normal(size=(n, 2)) for _ in range(3))
    jab, jba = th.projective_joints(psi, a_y, b_y)
    u, v = jab[:, 0].sum(-1), jba[:, 0].sum(-1)
    keep = np.flatnonzero((np.minimum(u, 1 - u) > 1e-3) & (np.minimum(v, 1 - v) > 1e-3))
    ms: list[Measurement] = []
    for i in keep:
        x = [
            u[i],
            jab[i, 0, 0] / u[i],
            jab[i, 1, 0] / (1 - u[i]),
            v[i],
            jba[i, 0, 0] / v[i],
            jba[i, 1, 0] / (1 - v[i]),
        ]
        ms += records(f"p{i}", x, mapping="map1") + records(f"p{i}", x, mapping="map2")
    res = analyze(ms)
    assert len(res.items) == len(keep) > 500
    q_theory = th.q_from_joints(jab[keep], jba[keep])
    oe_a, oe_b = th.order_effects_from_joints(jab[keep], jba[keep])
    q = np.array([r.q for r in res.items])
    assert np.max(np.abs(q)) < TOL
    np.testing.assert_allclose(q, q_theory, atol=TOL)
    np.testing.assert_allclose([r.oe_a for r in res.items], oe_a, atol=TOL)
    np.testing.assert_allclose([r.oe_b for r in res.items], oe_b, atol=TOL)
    for r, i in zip(res.items[:50], keep[:50], strict=True):
        np.testing.assert_allclose(res.joint(r.item, "map2", "AB"), jab[i], atol=TOL)
        np.testing.assert_allclose(res.joint(r.item, "map1", "BA"), jba[i], atol=TOL)
        assert r.q_env.lo == r.q_env.hi == r.q  # zero other mass: point envelope
    assert res.verdict_counts() == {"SATISFIED": len(keep), "VIOLATED": 0, "INDETERMINATE": 0}


def test_prop4_and_prop5_through_analyze() -> None:
    rng = np.random.default_rng(12)
    n = 200
    u, v = rng.uniform(0.05, 0.95, size=(2, n))
    r = rng.uniform(size=(5, n))
    sym = th.symmetric_repetition_kernels(u, v, r[0])
    mix = th.mixture_repetition_kernels(u, v, th.Retention(r[1], r[2], r[3], r[4]))
    ms: list[Measurement] = []
    for i in range(n):
        ms += records(f"sym{i}", kernel_x(sym, i), stratum="S1")
        ms += records(f"mix{i}", kernel_x(mix, i), stratum="S3", mapping="yesno")
    res = analyze(ms)
    q_sym = np.array([res.item(f"sym{i}").q for i in range(n)])
    oe_b_sym = np.array([res.item(f"sym{i}").oe_b for i in range(n)])
    q_mix = np.array([res.item(f"mix{i}").q for i in range(n)])
    assert np.max(np.abs(q_sym)) < TOL
    np.testing.assert_allclose(oe_b_sym, r[0] * (u - v), atol=TOL)
    np.testing.assert_allclose(q_mix, th.mixture_repetition_q(u, v, th.Retention(*r[1:])), atol=TOL)


# ---------------------------------------------------------------- envelope properties

# No shrink phase: these properties evaluate thousands of allocations per example, and
# shrinking a counterexample would take minutes; the unshrunk one is reported instead.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)
weights = st.tuples(
    st.floats(1e-6, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0, None])
)


def _masses(draws: Sequence[tuple[float, float, float, float | None]]) -> NDArray[np.float64]:
    """Six positions of normalised (p_y, p_n, o); the 4th draw forces o = 0 or a label to 0."""
    out = []
    for a, b, c, mode in draws:
        py, pn, o = a, b, c
        if mode == 0.0:
            o = 0.0
        elif mode == 1.0:
            pn = 0.0
        if py + pn <= 0:
            py = 1e-6
        s = py + pn + o
        out.append((py / s, pn / s, o / s))
    return np.array(out)


six_positions = st.lists(weights, min_size=6, max_size=6)


def _point(m: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
    return env.qq_statistics(env.binary_conditioned(m[..., 0], m[..., 1]))


def _at(m: NDArray[np.float64], t: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
    return env.qq_statistics(env.allocate(m[..., 0], m[..., 1], m[..., 2], t))


@settings(max_examples=150, deadline=None, phases=NO_SHRINK)
@given(six_positions)
def test_envelope_contains_point_estimate(draws: list[Any]) -> None:
    m = _masses(draws)
    box = env.envelope(m[:, 0], m[:, 1], m[:, 2])
    for val, lo, hi in zip(
        _point(m),
        (box.q_lo, box.oe_a_lo, box.oe_b_lo),
        (box.q_hi, box.oe_a_hi, box.oe_b_hi),
        strict=True,
    ):
        assert lo - TOL <= val <= hi + TOL


@settings(max_examples=100, deadline=None, phases=NO_SHRINK)
@given(six_positions)
def test_zero_other_mass_collapses_envelope(draws: list[Any]) -> None:
    m = _masses(draws)
    m[:, 2] = 0.0
    box = env.envelope(m[:, 0], m[:, 1], m[:, 2])
    q, oe_a, oe_b = _point(m)
    assert box.q_lo == box.q_hi == q
    assert box.oe_a_lo == box.oe_a_hi == oe_a
    assert box.oe_b_lo == box.oe_b_hi == oe_b


@settings(max_examples=100, deadline=None, phases=NO_SHRINK)
@given(six_positions, st.integers(0, 2**32 - 1))
def test_envelope_is_exact_range(draws: list[Any], seed: int) -> None:
    """Vertex range = true range: interior allocations never leave it; its ends are attained."""
    m = _masses(draws)
    box = env.envelope(m[:, 0], m[:, 1], m[:, 2])
    t = np.random.default_rng(seed).uniform(size=(2000, 6))
    for val, lo, hi in zip(
        _at(m, t), (box.q_lo, box.oe_a_lo, box.oe_b_lo), (box.q_hi, box.oe_a_hi, box.oe_b_hi), strict=True
    ):
        assert np.all(val >= lo - TOL) and np.all(val <= hi + TOL)
    vq, _, _ = _at(m, env.VERTICES.astype(float))
    assert vq.min() == box.q_lo and vq.max() == box.q_hi  # attained at allocations in the box


def _gamma(stats_: tuple[NDArray[np.float64], ...]) -> NDArray[np.float64]:
    q, a, b = stats_
    return np.asarray(np.abs(q) - np.abs(a) - np.abs(b))


@settings(max_examples=100, deadline=None, phases=NO_SHRINK)
@given(st.lists(six_positions, min_size=1, max_size=2), st.integers(0, 2**32 - 1))
def test_gamma_bounds_sound(mappings: list[Any], seed: int) -> None:
    """Every allocation's Γ of the pooled item lies in the certified [Γ_lower, Γ_upper]."""
    ms = np.array([_masses(d) for d in mappings])  # (k, 6, 3)
    k = len(mappings)
    pooled = env.envelope(ms[..., 0], ms[..., 1], ms[..., 2]).mean()
    lower, upper = env.gamma_bounds(pooled)
    rng = np.random.default_rng(seed)
    t = np.concatenate([rng.uniform(size=(1000, k, 6)), rng.integers(0, 2, size=(1000, k, 6))]).astype(float)
    per = _at(ms[None], t)  # each (N, k)
    g = _gamma(tuple(np.mean(s, axis=1) for s in per))
    assert np.all(g >= lower - TOL) and np.all(g <= upper + TOL)
    assert lower <= float(_gamma(tuple(np.mean(s, axis=-1) for s in _point(ms)))) <= upper


def test_pooled_envelope_equals_joint_vertex_enumeration() -> None:
    """Mean of per-mapping envelopes = exact range over all 2^12 allocations of both mappings."""
    rng = np.random.default_rng(13)
    for _ in range(20):
        raw = rng.dirichlet([1.0, 1.0, 0.3], size=(2, 6))
        pooled = env.envelope(raw[..., 0], raw[..., 1], raw[..., 2]).mean()
        bits = ((np.arange(4096)[:, None] >> np.arange(12)[None, :]) & 1).reshape(4096, 2, 6).astype(float)
        q, oe_a, _ = _at(raw[None], bits)
        q_mean, a_mean = q.mean(axis=1), oe_a.mean(axis=1)
        assert pooled.q_lo == pytest.approx(q_mean.min(), abs=TOL)
        assert pooled.q_hi == pytest.approx(q_mean.max(), abs=TOL)
        assert pooled.oe_a_hi == pytest.approx(a_mean.max(), abs=TOL)


# ---------------------------------------------------------------- decisions


def test_qq_decision_rule() -> None:
    assert env.qq_decision(-0.02, 0.02) == "SATISFIED"
    assert env.qq_decision(-0.01, 0.02 + 5e-10) == "SATISFIED"  # within float tolerance
    assert env.qq_decision(0.0201, 0.3) == "VIOLATED"
    assert env.qq_decision(-0.5, -0.021) == "VIOLATED"
    assert env.qq_decision(0.015, 0.025) == "INDETERMINATE"
    assert env.qq_decision(-0.5, 0.5) == "INDETERMINATE"
    assert env.gamma_class(-0.3, -0.1) == "NONCONTEXTUAL"
    assert env.gamma_class(-0.3, 0.0) == "NONCONTEXTUAL"
    assert env.gamma_class(1e-9, 0.2) == "CONTEXTUAL"
    assert env.gamma_class(-1e-9, 1e-9) == "INDETERMINATE"


def test_verdicts_on_hand_built_items() -> None:
    sat = th.symmetric_repetition_kernels(0.3, 0.8, 0.6)  # q = 0, OSS > 0
    vio = th.mixture_repetition_kernels(0.3, 0.8, th.Retention(0.9, 0.2, 0.5, 0.4))
    near = th.position_dependent_q(0.5, 0.5, 0.5, 0.53)  # q = 0.015
    ind = th.mixture_repetition_kernels(0.5, 0.5, th.Retention(0.5, 0.5, 0.53, 0.53))
    ms = records("sat", kernel_x(sat)) + records("vio", kernel_x(vio)) + records("ind", kernel_x(ind), 0.02)
    res = analyze(ms)
    assert [r.item for r in res.items] == ["sat", "vio", "ind"]  # input order
    assert res.item("sat").verdict == "SATISFIED"
    assert res.item("sat").gamma_class == "NONCONTEXTUAL"
    assert res.item("vio").q == pytest.approx(float(vio.q()), abs=TOL)
    assert res.item("vio").verdict == "VIOLATED"
    r_ind = res.item("ind")
    assert r_ind.q == pytest.approx(float(near), abs=TOL)
    assert r_ind.q_env.lo < 0.02 < r_ind.q_env.hi
    assert r_ind.verdict == "INDETERMINATE"
    assert res.verdict_counts() == {"SATISFIED": 1, "VIOLATED": 1, "INDETERMINATE": 1}


def test_gamma_classes_and_boundary_items() -> None:
    # |q| = 1 > OSS = 0: both marginals order-invariant, agreement flips to disagreement
    ctx = [0.5, 1.0, 0.0, 0.5, 0.0, 1.0]
    # deterministic order flip: AB answers (y, n), BA answers (y, y): |q| = OSS = 1
    flip = [1.0, 0.0, 0.5, 1.0, 1.0, 0.5]
    res = analyze(
        records("ctx", ctx, 1e-4) + records("flip0", flip, 0.0) + records("flip7", flip, 1e-7),
    )
    c = res.item("ctx")
    assert c.q == pytest.approx(-1.0) and c.oss == pytest.approx(0.0, abs=TOL)
    assert c.gamma_bounds.lo > 0 and c.gamma_class == "CONTEXTUAL"
    f0, f7 = res.item("flip0"), res.item("flip7")
    assert f0.q == 1.0 and f0.oss == 1.0 and f0.gamma_bounds.hi == 0.0
    # exactly on the boundary with no other mass and records that sum to 1: the seed's rule,
    # Γ_upper <= 0, certifies it (|q| <= OSS admits a noncontextual coupling)
    assert f0.precision == 0.0 and f0.gamma_class == "NONCONTEXTUAL"
    # the same item with other mass ~1e-7 is INDETERMINATE (as in the seed's pilot)
    assert f7.gamma_bounds.lo < 0 < f7.gamma_bounds.hi
    assert f7.gamma_class == "INDETERMINATE"
    assert res.gamma_counts() == {"NONCONTEXTUAL": 1, "CONTEXTUAL": 1, "INDETERMINATE": 1}
    # a tolerance beyond the precision absorbs the boundary item, which is why the default is 0
    tol_res = analyze(records("flip7", flip, 1e-7), QQParams(gamma_tol=1e-5))
    assert tol_res.items[0].gamma_class == "NONCONTEXTUAL"


def _gamma_by_hand(x: Sequence[float]) -> tuple[float, float]:
    """``(q, Γ)`` of six position probabilities from the joint distributions written out:
    q = P_AB(mismatch) - P_BA(mismatch), OE_A = P_BA(A_y) - P_AB(A_y), OE_B = P_AB(B_y) - P_BA(B_y)."""
    a1, b_y, b_n, b1, a_y, a_n = x
    mis_ab = a1 * (1 - b_y) + (1 - a1) * b_n
    mis_ba = b1 * (1 - a_y) + (1 - b1) * a_n
    oe_a = (b1 * a_y + (1 - b1) * a_n) - a1
    oe_b = (a1 * b_y + (1 - a1) * b_n) - b1
    q = mis_ab - mis_ba
    return q, abs(q) - abs(oe_a) - abs(oe_b)


@pytest.mark.parametrize(("delta", "when_rounded"), [(2.5e-7, "INDETERMINATE"), (1e-5, "NONCONTEXTUAL")])
def test_decisions_on_records_that_sum_to_one_are_the_seeds_rules_at_full_precision(
    delta: float, when_rounded: str
) -> None:
    # the deterministic order flip moved by delta at P_BA(A_y | B_y): Γ = -2 delta, records
    # summing to 1 exactly (no residual), so Γ_upper <= 0 certifies it however small |Γ| is
    x = [1.0, 0.0, 0.5, 1.0, 1.0 - delta, 0.5]
    _, gamma = _gamma_by_hand(x)
    assert gamma == pytest.approx(-2 * delta, rel=1e-6)
    it = analyze(records("near", x, 0.0)).items[0]
    assert it.precision == 0.0
    assert it.gamma_bounds.hi == pytest.approx(gamma, rel=1e-6, abs=1e-15)
    assert it.gamma_class == "NONCONTEXTUAL"
    # the same item from records showing a rounding residual of sum_tol (1e-6), which widens
    # the envelope and the margin: certified only when |Γ| (5e-7 or 2e-5) clears both
    rounded = records("near", x, 0.0)
    extra = QQParams().sum_tol
    rounded[0] = Measurement(**{**rounded[0].to_json(), "other": extra})  # sums to 1 + extra
    it = analyze(rounded).items[0]
    assert it.precision == pytest.approx(extra, rel=1e-9)
    assert it.gamma_class == when_rounded


@pytest.mark.parametrize(("q_want", "verdict"), [(0.02 - 5e-7, "SATISFIED"), (0.02 + 5e-7, "VIOLATED")])
def test_qq_verdict_near_epsilon_is_the_seeds(q_want: float, verdict: str) -> None:
    # q = P_AB(mismatch) = 1 - P_AB(B_y | A_y) with nothing else moving: the verdict is taken on
    # the band epsilon + float_tol alone, 5e-7 on either side of 0.02 decides
    x = [1.0, 1.0 - q_want, 0.5, 1.0, 1.0, 0.5]
    q, _ = _gamma_by_hand(x)
    assert q == pytest.approx(q_want, abs=1e-15)
    it = analyze(records("edge", x, 0.0)).items[0]
    assert it.q == pytest.approx(q, abs=1e-15) and it.precision == 0.0
    assert it.verdict == verdict


def test_pooling_is_equal_weight_mean() -> None:
    x1 = kernel_x(th.mixture_repetition_kernels(0.2, 0.7, th.Retention(0.9, 0.1, 0.3, 0.6)))
    x2 = kernel_x(th.mixture_repetition_kernels(0.6, 0.4, th.Retention(0.2, 0.8, 0.5, 0.5)))
    res = analyze(records("it", x1, 0.01, mapping="map1") + records("it", x2, 0.003, mapping="map2"))
    it = res.items[0]
    m1, m2 = it.mappings
    assert (m1.mapping, m2.mapping) == ("map1", "map2")
    for name in ("q", "oe_a", "oe_b", "u", "v"):
        assert getattr(it, name) == pytest.approx((getattr(m1, name) + getattr(m2, name)) / 2, abs=TOL)
    for name in ("q_env", "oe_a_env", "oe_b_env"):
        e, e1, e2 = getattr(it, name), getattr(m1, name), getattr(m2, name)
        assert e.lo == pytest.approx((e1.lo + e2.lo) / 2, abs=TOL)
        assert e.hi == pytest.approx((e1.hi + e2.hi) / 2, abs=TOL)
    assert it.oss == pytest.approx(abs(it.oe_a) + abs(it.oe_b), abs=TOL)  # OSS of pooled OEs
    le = it.label_effect
    assert le is not None
    assert le.delta_q == pytest.approx(abs(m1.q - m2.q), abs=TOL)
    assert le.delta_oss == pytest.approx(abs(m1.oss - m2.oss), abs=TOL)
    assert it.n_positions == 12


def test_semantic_canonicalisation_through_label_of() -> None:
    x = kernel_x(th.mixture_repetition_kernels(0.2, 0.7, th.Retention(0.9, 0.1, 0.3, 0.6)))
    a = analyze(records("it", x, 0.01, mapping="map1"))
    b = analyze(records("it", x, 0.01, mapping="map2"))  # labels swapped: A now means n
    assert a.items[0].q == pytest.approx(b.items[0].q, abs=TOL)
    assert a.items[0].q_env == b.items[0].q_env
    m = records("it", x, 0.0, mapping="map2")[0]
    assert m.probs["B"] == pytest.approx(x[0])  # the record really is label-swapped


# ---------------------------------------------------------------- diagnostics


def test_saturation_counting() -> None:
    sat7 = [1.0, 0.999, 0.0, 0.995, 0.5, 0.5]  # 4 of 6 saturated at 0.99
    half = [1.0, 0.999, 0.0, 0.6, 0.5, 0.5]  # 3 of 6: exactly half is not saturated
    soft = [0.98, 0.97, 0.96, 0.04, 0.5, 0.5]  # 4 of 6 above 0.95, 1 above 0.975
    mid = [0.98, 0.985, 0.02, 0.015, 0.5, 0.5]  # 4 of 6 above 0.975, none above 0.99
    res = analyze(records("a", sat7) + records("b", half) + records("c", soft) + records("d", mid))
    assert [r.saturated for r in res.items] == [True, False, False, False]
    assert res.item("a").n_saturated_positions == 4
    sens = {d.threshold: d.n_saturated for d in res.saturation_counts()}
    assert sens == {0.95: 3, 0.975: 2, 0.99: 1}
    assert is_saturated([0.999] * 7 + [0.5] * 5) and not is_saturated([0.999] * 6 + [0.5] * 6)
    d = res.distances(["a"])
    np.testing.assert_allclose(d, [0.0, 0.001, 0.0, 0.005, 0.5, 0.5], atol=TOL)
    assert res.to_json()["counts"]["saturated"] == 1


def test_memorization_alert() -> None:
    pairs = {"s2-01": "s1-01", "s2-02": "s1-02", "s2-09": "s1-09"}
    # seed's Track M values: only s1-02/s2-02 differs by more than 0.3 -> no alert
    oss = {"s1-01": 0.742, "s2-01": 0.804, "s1-02": 0.981, "s2-02": 0.0, "s1-09": 0.309, "s2-09": 0.595}
    r = memorization_alert(oss, pairs)
    assert r.n_exceeding == 1 and not r.alert
    r2 = memorization_alert({**oss, "s2-09": 0.7}, pairs)
    assert r2.n_exceeding == 2 and r2.alert
    r3 = memorization_alert({k: v for k, v in oss.items() if k != "s1-09"}, pairs)
    assert r3.missing == (("s1-09", "s2-09"),) and len(r3.pairs) == 2
    # through analyze: OSS taken from the pooled items
    flat = [0.5] * 6
    flip = [1.0, 0.0, 0.5, 1.0, 1.0, 0.5]  # OSS = 1
    ms = records("s1-a", flat) + records("s2-a", flip) + records("s1-b", flat) + records("s2-b", flip)
    res = analyze(ms, QQParams(memorization_pairs={"s2-a": "s1-a", "s2-b": "s1-b"}))
    assert res.memorization is not None and res.memorization.alert
    assert analyze(ms).memorization is None


def test_discriminant_fits() -> None:
    rng = np.random.default_rng(14)
    u, v = rng.uniform(0.05, 0.95, size=(2, 12))
    pol = th.mixture_repetition_kernels(u, v, th.Retention(0.2, 0.9, 0.2, 0.9))  # q = 0.7 (u - v)
    pos = th.mixture_repetition_kernels(u, v, th.Retention(0.1, 0.1, 0.6, 0.6))  # q = 0.5 S
    ms: list[Measurement] = []
    for i in range(12):
        ms += records(f"pol{i}", kernel_x(pol, i), stratum="S1")
        ms += records(f"pos{i}", kernel_x(pos, i), stratum="S3", mapping="yesno")
    res = analyze(ms)
    fits = {(f.stratum, f.family): f for f in res.fits}
    assert fits[("S1", "polarity")].k == pytest.approx(0.7, abs=1e-12)
    assert fits[("S1", "polarity")].rmse < 1e-12 and fits[("S1", "polarity")].decision == "compatible"
    assert fits[("S1", "polarity")].r2 == pytest.approx(1.0, abs=1e-12)
    assert fits[("S3", "position")].k == pytest.approx(0.5, abs=1e-12)
    assert fits[("S3", "position")].decision == "compatible"
    assert fits[("S1", "position")].n == 12
    # a q pattern neither form explains is rejected by both
    q_bad = np.array([0.3, 0.3, -0.3, -0.3])  # orthogonal to both u - v and S below
    f_pol, f_pos = discriminant_fits(q_bad, [0.5, 0.5, 0.6, 0.4], [0.4, 0.6, 0.5, 0.5], epsilon=0.02)
    assert f_pol.decision == f_pos.decision == "rejected"
    assert f_pol.rmse == pytest.approx(0.3) and f_pol.r2 == pytest.approx(0.0, abs=1e-12)


def test_g3_check() -> None:
    joint = np.array([[0.5, 0.1], [0.15, 0.25]])
    ok = g3_check(joint, [[100, 20], [30, 50]])
    assert ok.passed and ok.n == 200 and ok.alpha_cell == 0.0025
    bad = g3_check(joint, [[160, 5], [15, 20]])
    assert not bad.passed and not bad.inside[0, 0]
    with pytest.raises(ValueError, match="2x2"):
        g3_check([0.5, 0.5], [[1, 2], [3, 4]])


def test_sampled_records() -> None:
    base = records("s", [0.5, 0.9, 0.2, 0.4, 0.6, 0.5])
    sampled = []
    for i, m in enumerate(base):
        k_y = 10 + 10 * i
        counts = {"A": k_y, "B": 100 - k_y - 5, "other": 5}
        sampled.append(
            Measurement(**{**m.to_json(), "estimand": "sampled", "counts": counts, "n_draws": 100})
        )
    res = analyze(base + sampled)
    assert len(res.sampled) == 6
    s0 = res.sampled[0]
    assert (s0.k, s0.n, s0.n_other) == (10, 95, 5)
    assert s0.low < 10 / 95 < s0.high
    # the sampled estimand as the primary one uses the counts
    res_s = analyze(base + sampled, QQParams(estimand="sampled"))
    assert res_s.items[0].mappings[0].positions[0].p == pytest.approx(10 / 95, abs=TOL)
    assert res_s.items[0].mappings[0].positions[0].other == pytest.approx(0.05, abs=TOL)


def test_other_mass_gate_and_width() -> None:
    res = analyze(records("a", [0.5] * 6, 0.001) + records("b", [0.5] * 6, 0.0))
    assert res.max_other == pytest.approx(0.001) and res.g2_pass
    assert res.item("b").envelope_width == 0.0 and res.item("a").envelope_width > 0
    assert not analyze(records("a", [0.5] * 6, 0.01)).g2_pass


# ---------------------------------------------------------------- validation and JSON


def _replace(ms: list[Measurement], i: int, **kw: Any) -> list[Measurement]:
    out = list(ms)
    out[i] = Measurement(**{**ms[i].to_json(), **kw})
    return out


def test_validation_errors_name_the_record() -> None:
    ms = records("s1-07", [0.5] * 6, mapping="map2")
    with pytest.raises(
        ValueError, match=r"item 's1-07', mapping 'map2', order 'BA': missing position 2 \(first answer 'n'\)"
    ):
        analyze(ms[:-1])
    with pytest.raises(
        ValueError, match=r"item 's1-07', mapping 'map2', order 'AB', position 1.*not a probability"
    ):
        analyze(_replace(ms, 0, probs={"A": 0.5, "B": 1.5}))
    # no probability on either label: the item is left out (test_undefined_positions), and with
    # no other item nothing can be analysed
    with pytest.raises(ValueError, match=r"no item can be analysed.*item 's1-07'.*order 'BA', position 2"):
        analyze(_replace(ms, 4, probs={"A": 0.0, "B": 0.0}, other=1.0))
    with pytest.raises(ValueError, match=r"item 's1-07'.*exceeds 1"):
        analyze(_replace(ms, 2, probs={"A": 0.7, "B": 0.7}))
    with pytest.raises(ValueError, match=r"item 's1-07'.*duplicate"):
        analyze([*ms, ms[3]])
    with pytest.raises(ValueError, match=r"item 's1-07'.*question 'A', expected 'B'"):
        analyze(_replace(ms, 3, question="A"))
    with pytest.raises(ValueError, match=r"item 's1-07'.*no probability"):
        analyze(_replace(ms, 1, probs={"Yes": 0.5, "No": 0.5}))
    with pytest.raises(ValueError, match=r"item 's1-07', mapping 'map2', order 'AB': missing position 1"):
        analyze(ms[3:])
    with pytest.raises(ValueError, match="no measurements"):
        analyze([])
    # tiny rounding above 1 is not an error: its magnitude stays in the envelope as unassigned mass
    ok = analyze(_replace(ms, 0, probs={"B": 0.6, "A": 0.4 + 1e-9}))
    assert ok.items[0].mappings[0].positions[0].other == pytest.approx(1e-9, rel=1e-6)


def _plain(x: Any) -> bool:
    if isinstance(x, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in x.items())
    if isinstance(x, list):
        return all(_plain(v) for v in x)
    return x is None or type(x) in (bool, int, float, str)


def test_to_json_is_plain_and_stable() -> None:
    x = kernel_x(th.mixture_repetition_kernels(0.2, 0.7, th.Retention(0.9, 0.1, 0.3, 0.6)))
    ms = (
        records("s1-02", x, 0.002, mapping="map1")
        + records("s1-02", x, 0.0, mapping="map2")
        + records("s3-01", [0.5] * 6, mapping="yesno", stratum="S3")
        + records("s1-01", [1.0, 0.0, 0.5, 1.0, 1.0, 0.5])
    )
    res = analyze(ms, QQParams(memorization_pairs={"s3-01": "s1-01"}))
    d = res.to_json()
    assert _plain(d)
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert d == analyze(ms, QQParams(memorization_pairs={"s3-01": "s1-01"})).to_json()
    assert [it["item"] for it in d["items"]] == ["s1-02", "s3-01", "s1-01"]
    assert set(d) == {
        "study",
        "params",
        "n_items",
        "counts",
        "summary",
        "saturation",
        "mass",
        "memorization",
        "fits",
        "items",
        "sampled",
    }
    assert d["counts"]["verdict"] == {"SATISFIED": 1, "VIOLATED": 2, "INDETERMINATE": 0}
    item = d["items"][0]
    assert item["label_effect"]["delta_q"] == pytest.approx(0.0, abs=TOL)
    assert d["items"][1]["label_effect"] is None  # Yes/No: single mapping
    cell = item["mappings"][0]["cells"][1]
    assert cell["order"] == "BA" and set(cell["joint"]) == {"yy", "yn", "ny", "nn"}
    assert [p["first_answer"] for p in cell["positions"]] == [None, "y", "n"]


def test_fit_through_origin_sums_are_correctly_rounded():
    """The fit's sums are the correctly rounded sums of the element-wise products (compared with
    exact rational arithmetic, to the bit), so k, rmse and r2 do not depend on the summation
    order a BLAS kernel picks for the processor (they differed in their last digits between an
    AVX2 and an AVX-512 host)."""
    import math
    from fractions import Fraction

    from lmaudit.studies.qq.diagnostics import fit_through_origin

    rng = np.random.default_rng(7)
    x = rng.uniform(-0.3, 0.3, 257)
    q = 0.45 * x + rng.normal(0.0, 0.05, x.size)

    def exact(values: np.ndarray) -> float:
        return float(sum((Fraction(float(v)) for v in values), Fraction(0)))

    fit = fit_through_origin(x, q)
    k = exact(x * q) / exact(x * x)
    ss_res = exact((q - k * x) ** 2)
    assert fit.k == k
    assert fit.rmse == math.sqrt(ss_res / x.size)
    assert fit.r2 == 1.0 - ss_res / exact(q * q)
