"""Qubit states and (unsharp) Lüders instruments for the QQ ``sim`` agents, in Bloch form.

A question with "y" axis ``a`` (a unit Bloch vector) has the rank-1 projectors
``P_y = (I + a.sigma)/2`` and ``P_n = I - P_y``. Its Lüders instrument with outcome
sharpnesses ``eta_y, eta_n`` in ``[0, 1]`` has effects

    E_y = (1 + eta_y)/2 P_y + (1 - eta_n)/2 P_n,      E_n = I - E_y,

and Kraus operators ``M_o = sqrt(E_o)`` (exact: ``E_o`` is diagonal in the ``P_y, P_n``
basis), so the update is ``rho -> M_o rho M_o / tr(E_o rho)``. ``eta_y = eta_n = 1`` is the
projective measurement (Born rule + Lüders collapse onto the outcome eigenvector);
``eta_y = eta_n`` is the symmetric unsharp instrument ``E_y = (I + eta a.sigma)/2``.

Everything is computed with Pauli algebra on Bloch vectors (``rho = (I + r.sigma)/2``): with
``M = c0 I + c1 a.sigma``,

    tr(M rho M) = c0^2 + c1^2 + 2 c0 c1 (a.r)
    Bloch(M rho M / tr) = [(c0^2 - c1^2) r + 2 c1 (c0 + c1 (a.r)) a] / tr(M rho M).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lmaudit.backends.sim.qq.readout import SequentialKernel

Vec = tuple[float, float, float]


def bloch_vector(theta: float, phi: float) -> Vec:
    """Unit vector with polar angle ``theta`` and azimuth ``phi``."""
    return (math.sin(theta) * math.cos(phi), math.sin(theta) * math.sin(phi), math.cos(theta))


def _dot(x: Sequence[float], y: Sequence[float]) -> float:
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


class LuedersInstrument:
    """The Lüders instrument of one binary question (axis ``a``, sharpnesses ``eta_y, eta_n``)."""

    def __init__(self, axis: Vec, eta_y: float, eta_n: float) -> None:
        self.axis = axis
        # eigenvalues of E_o on P_y and P_n
        lam = {"y": ((1 + eta_y) / 2, (1 - eta_n) / 2), "n": ((1 - eta_y) / 2, (1 + eta_n) / 2)}
        # M_o = sqrt(E_o) = c0 I + c1 a.sigma
        self.kraus = {
            o: ((math.sqrt(ly) + math.sqrt(ln)) / 2, (math.sqrt(ly) - math.sqrt(ln)) / 2)
            for o, (ly, ln) in lam.items()
        }

    def prob(self, outcome: str, r: Vec) -> float:
        c0, c1 = self.kraus[outcome]
        return c0 * c0 + c1 * c1 + 2 * c0 * c1 * _dot(self.axis, r)

    def update(self, outcome: str, r: Vec) -> Vec:
        """Bloch vector after ``outcome``; an outcome of probability 0 updates the maximally
        mixed state instead (a convention: the conditional is then the instrument's own)."""
        if self.prob(outcome, r) <= 1e-15:
            r = (0.0, 0.0, 0.0)
        c0, c1 = self.kraus[outcome]
        ar = _dot(self.axis, r)
        tr = c0 * c0 + c1 * c1 + 2 * c0 * c1 * ar
        s, t = (c0 * c0 - c1 * c1) / tr, 2 * c1 * (c0 + c1 * ar) / tr
        return (s * r[0] + t * self.axis[0], s * r[1] + t * self.axis[1], s * r[2] + t * self.axis[2])


def sequential_kernel(r: Vec, inst_a: LuedersInstrument, inst_b: LuedersInstrument) -> SequentialKernel:
    """Born-rule marginals and instrument-updated conditionals for both orders."""
    return SequentialKernel(
        u=inst_a.prob("y", r),
        v=inst_b.prob("y", r),
        k_ab_y=inst_b.prob("y", inst_a.update("y", r)),
        k_ab_n=inst_b.prob("y", inst_a.update("n", r)),
        k_ba_y=inst_a.prob("y", inst_b.update("y", r)),
        k_ba_n=inst_a.prob("y", inst_b.update("n", r)),
    )
