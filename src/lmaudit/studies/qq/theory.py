"""Closed forms of the QQ theory (seed 000, section 3 and appendix A).

Used by the tests to validate the analysis and by the ``sim`` agents as ground truth.
Everything is vectorised: arguments broadcast, results are float arrays (0-d for scalars).

Notation. Questions ``A`` (the item's first) and ``B``; answers ``y`` / ``n``.
``u = p_A(y)``, ``v = p_B(y)`` are the first-position marginals. The mismatch (flip)
rates are ``a = K_AB(n|y)``, ``b = K_AB(y|n)``, ``c = K_BA(n|y)``, ``d = K_BA(y|n)``.
Joints are arrays ``[..., first, second]`` in *presentation* order, index 0 = ``y``,
1 = ``n``: ``joint_AB[a, b] = p_A(a) K_AB(b|a)`` (first answer to ``A``) and
``joint_BA[b, a] = p_B(b) K_BA(a|b)`` (first answer to ``B``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

__all__ = [
    "Retention",
    "SequentialKernels",
    "disagreement",
    "joints_from_kernels",
    "mixture_repetition_kernels",
    "mixture_repetition_q",
    "order_effects_from_joints",
    "polarity_dependent_q",
    "position_dependent_q",
    "projective_joints",
    "q_from_joints",
    "q_from_kernels",
    "symmetric_repetition_kernels",
    "symmetric_repetition_oe_b",
    "unsigned_disagreement_base",
]


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


@dataclass(frozen=True)
class SequentialKernels:
    """Order-conditioned kernels of one item: first-position marginals and flip rates.

    The six position probabilities a measurement sees are :meth:`position_probs`.
    """

    u: FloatArray  # p_A(y): position 1 in order AB
    v: FloatArray  # p_B(y): position 1 in order BA
    a: FloatArray  # K_AB(n | y)
    b: FloatArray  # K_AB(y | n)
    c: FloatArray  # K_BA(n | y)
    d: FloatArray  # K_BA(y | n)

    def position_probs(self) -> dict[tuple[str, int, str | None], FloatArray]:
        """P(y) at each (order, position, first_answer) position of the cell pair."""
        return {
            ("AB", 1, None): self.u,
            ("AB", 2, "y"): 1.0 - self.a,
            ("AB", 2, "n"): self.b,
            ("BA", 1, None): self.v,
            ("BA", 2, "y"): 1.0 - self.c,
            ("BA", 2, "n"): self.d,
        }

    def joints(self) -> tuple[FloatArray, FloatArray]:
        return joints_from_kernels(self.u, self.v, self.a, self.b, self.c, self.d)

    def q(self) -> FloatArray:
        return q_from_kernels(self.u, self.v, self.a, self.b, self.c, self.d)

    def order_effects(self) -> tuple[FloatArray, FloatArray]:
        """``(OE_A, OE_B)``."""
        return order_effects_from_joints(*self.joints())


def q_from_kernels(
    u: ArrayLike, v: ArrayLike, a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike
) -> FloatArray:
    """``q = M_AB - M_BA`` with ``M_AB = u a + (1-u) b``, ``M_BA = v c + (1-v) d`` (eq. 5).

    Equivalently ``u(a-b) - v(c-d) + (b-d)`` (eq. 2).
    """
    uf, vf = _f(u), _f(v)
    return uf * _f(a) + (1 - uf) * _f(b) - (vf * _f(c) + (1 - vf) * _f(d))


def joints_from_kernels(
    u: ArrayLike, v: ArrayLike, a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """``(joint_AB, joint_BA)``, each of shape ``(..., 2, 2)`` in presentation order."""
    uf, vf, af, bf, cf, df = np.broadcast_arrays(_f(u), _f(v), _f(a), _f(b), _f(c), _f(d))
    j_ab = np.stack(
        [np.stack([uf * (1 - af), uf * af], -1), np.stack([(1 - uf) * bf, (1 - uf) * (1 - bf)], -1)], -2
    )
    j_ba = np.stack(
        [np.stack([vf * (1 - cf), vf * cf], -1), np.stack([(1 - vf) * df, (1 - vf) * (1 - df)], -1)], -2
    )
    return j_ab, j_ba


def disagreement(joint: ArrayLike) -> FloatArray:
    """``M = joint[y, n] + joint[n, y]``: probability that the two answers differ."""
    j = _f(joint)
    return j[..., 0, 1] + j[..., 1, 0]


def q_from_joints(joint_ab: ArrayLike, joint_ba: ArrayLike) -> FloatArray:
    """``q_QQ = M_AB - M_BA``, a linear functional of the joint pair (Prop. 7)."""
    return disagreement(joint_ab) - disagreement(joint_ba)


def order_effects_from_joints(joint_ab: ArrayLike, joint_ba: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``OE_A = p_BA(A_y) - p_AB(A_y)`` and ``OE_B = p_AB(B_y) - p_BA(B_y)``.

    ``A`` is the first answer in ``joint_AB`` and the second in ``joint_BA``; ``B`` the reverse.
    """
    jab, jba = _f(joint_ab), _f(joint_ba)
    ab_a_y = jab[..., 0, 0] + jab[..., 0, 1]
    ab_b_y = jab[..., 0, 0] + jab[..., 1, 0]
    ba_b_y = jba[..., 0, 0] + jba[..., 0, 1]
    ba_a_y = jba[..., 0, 0] + jba[..., 1, 0]
    return ba_a_y - ab_a_y, ab_b_y - ba_b_y


@dataclass(frozen=True)
class Retention:
    """The retention rates of the mixture-repetition family (Prop. 5): after first answer
    ``α`` the first answer is repeated with probability ``r_AB[α]`` in order AB (``ab_y``,
    ``ab_n``) and ``r_BA[α]`` in order BA (``ba_y``, ``ba_n``)."""

    ab_y: ArrayLike
    ab_n: ArrayLike
    ba_y: ArrayLike
    ba_n: ArrayLike

    @classmethod
    def symmetric(cls, r: ArrayLike) -> Retention:
        """One retention rate everywhere (Prop. 4)."""
        return cls(r, r, r, r)


def mixture_repetition_kernels(u: ArrayLike, v: ArrayLike, r: Retention) -> SequentialKernels:
    """Mixture-repetition family (Prop. 5).

    ``K_AB(β|α) = r_AB[α] 1[β=α] + (1 - r_AB[α]) p_B(β)`` and symmetrically for ``BA``:
    with probability ``r[α]`` (retention after first answer ``α``) the first answer is
    repeated, otherwise the second question is answered from its own first-position marginal.
    Flip rates: ``a = (1-r_AB[y])(1-v)``, ``b = (1-r_AB[n]) v``, ``c = (1-r_BA[y])(1-u)``,
    ``d = (1-r_BA[n]) u``.
    """
    uf, vf = _f(u), _f(v)
    a = (1 - _f(r.ab_y)) * (1 - vf)
    b = (1 - _f(r.ab_n)) * vf
    c = (1 - _f(r.ba_y)) * (1 - uf)
    d = (1 - _f(r.ba_n)) * uf
    uf, vf, a, b, c, d = np.broadcast_arrays(uf, vf, a, b, c, d)
    return SequentialKernels(u=uf, v=vf, a=a, b=b, c=c, d=d)


def symmetric_repetition_kernels(u: ArrayLike, v: ArrayLike, r: ArrayLike) -> SequentialKernels:
    """Symmetric repetition (Prop. 4): one retention rate ``r`` everywhere; ``q ≡ 0``."""
    return mixture_repetition_kernels(u, v, Retention.symmetric(r))


def symmetric_repetition_oe_b(u: ArrayLike, v: ArrayLike, r: ArrayLike) -> FloatArray:
    """``OE_B = r (u - v)`` under symmetric repetition (eq. 8)."""
    return _f(r) * (_f(u) - _f(v))


def mixture_repetition_q(u: ArrayLike, v: ArrayLike, r: Retention) -> FloatArray:
    """Closed form (eq. 3 / 11): ``u(1-v)(r_BA[n]-r_AB[y]) + (1-u)v(r_BA[y]-r_AB[n])``."""
    uf, vf = _f(u), _f(v)
    return uf * (1 - vf) * (_f(r.ba_n) - _f(r.ab_y)) + (1 - uf) * vf * (_f(r.ba_y) - _f(r.ab_n))


def unsigned_disagreement_base(u: ArrayLike, v: ArrayLike) -> FloatArray:
    """``S = u(1-v) + (1-u)v``: disagreement probability of independent answers."""
    uf, vf = _f(u), _f(v)
    return uf * (1 - vf) + (1 - uf) * vf


def polarity_dependent_q(u: ArrayLike, v: ArrayLike, r_y: ArrayLike, r_n: ArrayLike) -> FloatArray:
    """Position-invariant retention ``r[·]`` (same in both orders): ``q = (r[n]-r[y])(u-v)``."""
    return (_f(r_n) - _f(r_y)) * (_f(u) - _f(v))


def position_dependent_q(u: ArrayLike, v: ArrayLike, r_ab: ArrayLike, r_ba: ArrayLike) -> FloatArray:
    """Polarity-invariant retention ``r_AB``, ``r_BA``: ``q = (r_BA - r_AB) S``."""
    return (_f(r_ba) - _f(r_ab)) * unsigned_disagreement_base(u, v)


def projective_joints(state: ArrayLike, a_y: ArrayLike, b_y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Sequential rank-1 projective (Lüders) measurement on a qubit (Theorem 2).

    ``state``, ``a_y``, ``b_y`` are 2-vectors (real or complex, shape ``(..., 2)``; need not
    be normalised): the state and the ``y`` eigenvectors of questions ``A`` and ``B``; the
    ``n`` projector is the orthogonal complement. Returns ``(joint_AB, joint_BA)`` with
    ``joint_XY[α, β] = ‖P_{Y,β} P_{X,α} ψ‖²``.
    """
    psi = np.asarray(state, dtype=np.complex128)
    psi = psi / np.linalg.norm(psi, axis=-1, keepdims=True)

    def projectors(vec: ArrayLike) -> NDArray[np.complex128]:
        w = np.asarray(vec, dtype=np.complex128)
        w = w / np.linalg.norm(w, axis=-1, keepdims=True)
        p_y = w[..., :, None] * np.conj(w)[..., None, :]
        eye = np.broadcast_to(np.eye(2, dtype=np.complex128), p_y.shape)
        return np.stack([p_y, eye - p_y], axis=-3)  # (..., 2 answers, 2, 2)

    p_a, p_b = projectors(a_y), projectors(b_y)

    def joint(first: NDArray[np.complex128], second: NDArray[np.complex128]) -> FloatArray:
        after_first = np.einsum("...aij,...j->...ai", first, psi)
        after_both = np.einsum("...bij,...aj->...abi", second, after_first)
        return np.asarray(np.sum(np.abs(after_both) ** 2, axis=-1), dtype=np.float64)

    return joint(p_a, p_b), joint(p_b, p_a)
