"""Section 3 results checked numerically against independent direct computations.

Every check runs over thousands of random configurations (fixed seeds); the tolerance
1e-12 is for double-precision rounding of O(1) quantities.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from lmaudit.studies.qq import theory as th

N = 5000
TOL = 1e-12


def _direct_joints(kernels: th.SequentialKernels) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Joints by explicit loops over answers (independent of theory.joints_from_kernels)."""
    k = kernels
    shape = np.broadcast(k.u, k.v, k.a, k.b, k.c, k.d).shape
    jab = np.zeros((*shape, 2, 2))
    jba = np.zeros((*shape, 2, 2))
    # K_AB(second | first): rows first in (y, n), columns second in (y, n)
    k_ab = {(0, 0): 1 - k.a, (0, 1): k.a, (1, 0): k.b, (1, 1): 1 - k.b}
    k_ba = {(0, 0): 1 - k.c, (0, 1): k.c, (1, 0): k.d, (1, 1): 1 - k.d}
    for first in (0, 1):
        p_a = k.u if first == 0 else 1 - k.u
        p_b = k.v if first == 0 else 1 - k.v
        for second in (0, 1):
            jab[..., first, second] = p_a * k_ab[(first, second)]
            jba[..., first, second] = p_b * k_ba[(first, second)]
    return jab, jba


def _q_direct(jab: NDArray[np.float64], jba: NDArray[np.float64]) -> NDArray[np.float64]:
    disagree = np.array([[0.0, 1.0], [1.0, 0.0]])
    return np.asarray(np.sum(jab * disagree, axis=(-2, -1)) - np.sum(jba * disagree, axis=(-2, -1)))


def test_q_from_kernels_equations_2_and_5() -> None:
    rng = np.random.default_rng(1)
    u, v, a, b, c, d = rng.uniform(size=(6, N))
    q = th.q_from_kernels(u, v, a, b, c, d)
    np.testing.assert_allclose(q, u * (a - b) - v * (c - d) + (b - d), atol=TOL)  # eq. 2
    kern = th.SequentialKernels(u, v, a, b, c, d)
    jab, jba = _direct_joints(kern)
    np.testing.assert_allclose(q, _q_direct(jab, jba), atol=TOL)
    np.testing.assert_allclose(kern.q(), th.q_from_joints(*kern.joints()), atol=TOL)
    got_ab, got_ba = kern.joints()
    np.testing.assert_allclose(got_ab, jab, atol=TOL)
    np.testing.assert_allclose(got_ba, jba, atol=TOL)
    np.testing.assert_allclose(got_ab.sum(axis=(-2, -1)), 1.0, atol=TOL)


def test_theorem3_equal_flip_rates_satisfy_qq() -> None:
    rng = np.random.default_rng(2)
    u, v, a = rng.uniform(size=(3, N))
    assert np.max(np.abs(th.q_from_kernels(u, v, a, a, a, a))) < TOL
    # ... and unequal constant rates violate it somewhere on the open square
    q = th.q_from_kernels(u, v, 0.3, 0.1, 0.2, 0.2)
    assert np.max(np.abs(q)) > 0.05


def test_order_effects_and_position_probs_consistent() -> None:
    rng = np.random.default_rng(3)
    kern = th.SequentialKernels(*rng.uniform(size=(6, N)))
    jab, jba = _direct_joints(kern)
    oe_a, oe_b = kern.order_effects()
    # OE_A = p_BA(A_y) - p_AB(A_y); in BA the answer to A is the *second* one.
    np.testing.assert_allclose(oe_a, jba[..., 0, 0] + jba[..., 1, 0] - kern.u, atol=TOL)
    np.testing.assert_allclose(oe_b, jab[..., 0, 0] + jab[..., 1, 0] - kern.v, atol=TOL)
    pp = kern.position_probs()
    np.testing.assert_allclose(pp[("AB", 2, "y")], jab[..., 0, 0] / kern.u, atol=1e-9)
    np.testing.assert_allclose(pp[("BA", 2, "n")], jba[..., 1, 0] / (1 - kern.v), atol=1e-9)


def _random_qubits(rng: np.random.Generator, n: int, complex_: bool) -> NDArray[np.complex128]:
    z = rng.normal(size=(n, 2)) + (1j * rng.normal(size=(n, 2)) if complex_ else 0)
    return np.asarray(z, dtype=np.complex128)


@pytest.mark.parametrize("complex_", [False, True])
def test_theorem2_projective_measurement_satisfies_qq(complex_: bool) -> None:
    rng = np.random.default_rng(4 + complex_)
    psi, a_y, b_y = (_random_qubits(rng, N, complex_) for _ in range(3))
    jab, jba = th.projective_joints(psi, a_y, b_y)
    np.testing.assert_allclose(jab.sum(axis=(-2, -1)), 1.0, atol=TOL)
    assert np.max(np.abs(_q_direct(jab, jba))) < TOL
    # projective transition symmetry: a = b = c = d = |<A_y|B_n>|^2 at every item
    u, v = jab[:, 0].sum(-1), jba[:, 0].sum(-1)
    ok = (np.minimum(u, 1 - u) > 1e-3) & (np.minimum(v, 1 - v) > 1e-3)
    a = jab[ok, 0, 1] / u[ok]
    b = jab[ok, 1, 0] / (1 - u[ok])
    c = jba[ok, 0, 1] / v[ok]
    an, bn = (
        a_y[ok] / np.linalg.norm(a_y[ok], axis=1, keepdims=True),
        b_y[ok] / np.linalg.norm(b_y[ok], axis=1, keepdims=True),
    )
    overlap_y = np.abs(np.sum(np.conj(an) * bn, axis=1)) ** 2
    np.testing.assert_allclose(a, 1 - overlap_y, atol=1e-9)
    np.testing.assert_allclose(b, a, atol=1e-9)
    np.testing.assert_allclose(c, a, atol=1e-9)
    # order effects are generically nonzero: QQ holds *despite* order effects
    oe_a, _ = th.order_effects_from_joints(jab, jba)
    assert np.max(np.abs(oe_a)) > 0.1


def test_prop4_symmetric_repetition() -> None:
    rng = np.random.default_rng(6)
    u, v, r = rng.uniform(size=(3, N))
    kern = th.symmetric_repetition_kernels(u, v, r)
    jab, jba = _direct_joints(kern)
    assert np.max(np.abs(_q_direct(jab, jba))) < TOL
    assert np.max(np.abs(kern.q())) < TOL
    _, oe_b = kern.order_effects()
    np.testing.assert_allclose(oe_b, r * (u - v), atol=TOL)
    np.testing.assert_allclose(th.symmetric_repetition_oe_b(u, v, r), oe_b, atol=TOL)
    # mismatch rates a = (1-r)(1-v), b = (1-r)v: a - b = (1-r)(1-2v)
    np.testing.assert_allclose(kern.a, (1 - r) * (1 - v), atol=TOL)
    np.testing.assert_allclose(kern.a - kern.b, (1 - r) * (1 - 2 * v), atol=TOL)
    # the kernel itself, written out: K_AB(y|y) = r + (1-r) v
    np.testing.assert_allclose(jab[..., 0, 0], u * (r + (1 - r) * v), atol=TOL)


def test_prop5_mixture_repetition_closed_form() -> None:
    rng = np.random.default_rng(7)
    u, v, r_ab_y, r_ab_n, r_ba_y, r_ba_n = rng.uniform(size=(6, N))
    kern = th.mixture_repetition_kernels(u, v, th.Retention(r_ab_y, r_ab_n, r_ba_y, r_ba_n))
    q_direct = _q_direct(*_direct_joints(kern))
    q_closed = th.mixture_repetition_q(u, v, th.Retention(r_ab_y, r_ab_n, r_ba_y, r_ba_n))
    np.testing.assert_allclose(q_closed, q_direct, atol=TOL)
    expected = u * (1 - v) * (r_ba_n - r_ab_y) + (1 - u) * v * (r_ba_y - r_ab_n)  # eq. 11
    np.testing.assert_allclose(q_closed, expected, atol=TOL)
    assert np.max(np.abs(q_closed)) > 0.3
    # cross-polarity position symmetry r_AB[y] = r_BA[n], r_AB[n] = r_BA[y] gives q = 0
    sym = th.mixture_repetition_kernels(u, v, th.Retention(r_ab_y, r_ab_n, r_ab_n, r_ab_y))
    assert np.max(np.abs(_q_direct(*_direct_joints(sym)))) < TOL


def test_prop5_special_cases() -> None:
    rng = np.random.default_rng(8)
    u, v, r_y, r_n, r_ab, r_ba = rng.uniform(size=(6, N))
    # position-invariant (same r[.] in both orders): polarity-dependent repetition
    pol = th.mixture_repetition_kernels(u, v, th.Retention(r_y, r_n, r_y, r_n))
    np.testing.assert_allclose(_q_direct(*_direct_joints(pol)), (r_n - r_y) * (u - v), atol=TOL)
    np.testing.assert_allclose(th.polarity_dependent_q(u, v, r_y, r_n), (r_n - r_y) * (u - v), atol=TOL)
    # polarity-invariant (r_XY[y] = r_XY[n]): position-dependent repetition
    pos = th.mixture_repetition_kernels(u, v, th.Retention(r_ab, r_ab, r_ba, r_ba))
    s = u * (1 - v) + (1 - u) * v
    np.testing.assert_allclose(_q_direct(*_direct_joints(pos)), (r_ba - r_ab) * s, atol=TOL)
    np.testing.assert_allclose(th.position_dependent_q(u, v, r_ab, r_ba), (r_ba - r_ab) * s, atol=TOL)
    np.testing.assert_allclose(th.unsigned_disagreement_base(u, v), s, atol=TOL)


def test_corollary6_translation_identity() -> None:
    """With +-1 coding, |E[AB]_AB - E[AB]_BA| = 2|q| and |E[A]_AB - E[A]_BA| = 2|OE_A|."""
    rng = np.random.default_rng(9)
    kern = th.SequentialKernels(*rng.uniform(size=(6, N)))
    jab, jba = _direct_joints(kern)
    sign = np.array([1.0, -1.0])
    prod = np.outer(sign, sign)
    e_ab = np.sum(jab * prod, axis=(-2, -1))
    e_ba = np.sum(jba * prod, axis=(-2, -1))  # product is symmetric, order of factors irrelevant
    np.testing.assert_allclose(np.abs(e_ab - e_ba), 2 * np.abs(kern.q()), atol=TOL)
    e_a_ab = np.sum(jab.sum(-1) * sign, axis=-1)  # A first in AB
    e_a_ba = np.sum(jba.sum(-2) * sign, axis=-1)  # A second in BA
    oe_a, _ = kern.order_effects()
    np.testing.assert_allclose(np.abs(e_a_ab - e_a_ba), 2 * np.abs(oe_a), atol=TOL)


def test_prop7_order_matched_mixing() -> None:
    rng = np.random.default_rng(10)
    n_comp = 5
    psi, a_y, b_y = (_random_qubits(rng, n_comp, True) for _ in range(3))
    jab, jba = th.projective_joints(psi, a_y, b_y)  # each component satisfies QQ
    w = rng.dirichlet(np.ones(n_comp))
    mix_ab = np.einsum("k,kij->ij", w, jab)
    mix_ba = np.einsum("k,kij->ij", w, jba)
    assert abs(float(th.q_from_joints(mix_ab, mix_ba))) < TOL
    # order-dependent selection: component 0 in AB, component 1 in BA
    q_sel = float(th.q_from_joints(jab[0], jba[1]))
    m = th.disagreement(jab)
    assert q_sel == pytest.approx(float(m[0] - m[1]), abs=TOL)
