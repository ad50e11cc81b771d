"""Shared helpers of the draws tests (planted families, small Monte Carlo settings)."""

from __future__ import annotations

import numpy as np

from lmaudit.studies.draws.family import AnalysisParams
from lmaudit.studies.draws.simulate import draw_persistent

# small settings for Monte Carlo property tests (the registered ones are in conf/study/draws.yaml)
FAST = AnalysisParams(
    n_perm=199,
    rho_grid=tuple(round(0.02 * i, 2) for i in range(26)),
    n_sims=200,
    power_rhos=(0.0, 0.05, 0.1, 0.3),
)


def family(
    rng: np.random.Generator, n_seq: int, n: int, rho: float, k: int = 3, drift: bool = False
) -> list[list[int]]:
    """A planted family: per-sequence Dirichlet(1) shares; with ``drift`` the shares reverse."""
    shares = rng.dirichlet(np.ones(k), size=n_seq)
    end = shares[:, ::-1] if drift else None
    return [x.tolist() for x in draw_persistent(shares, [n] * n_seq, rho, rng=rng, shares_end=end)]
