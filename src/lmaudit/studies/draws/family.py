"""The registered analysis of one family (seed 004, "The test" and "Secondary"), pure.

:func:`analyze_family` takes a family's answer sequences with their sources and returns a
:class:`FamilyAnalysis` whose columns are the family, each source, and (when the grouped
diagnostic flags a source) the family without its flagged sources. One set of joint
permutations and one set of synthetic datasets serve every column.

* ``T = sum (R - E0)``; one-sided Monte Carlo p-value ``(1 + #{T* >= T}) / (1 + B)`` from
  ``B`` joint permutations (compared as integer repeat sums, so ties are exact).
* ``rho_hat = T / sum (n - 1 - E0)`` over informative sequences, with (given the prompts) a
  percentile bootstrap interval over prompts (:mod:`.bootstrap`; not registered).
* ``share_le(rho)``: share of synthetic datasets with ``T_sim <= T``; ``rho_upper`` is the
  largest grid ``rho`` with ``share_le >= alpha`` (``> max grid`` if that is the last one:
  uninformative; ``< min grid`` if none). ``rho_cal``: the same with 0.5 (median-matched).
* Power at ``rho``: share of datasets with ``T_sim`` above the ``1 - alpha`` quantile of the
  observed permutation null.
* Drift: ``T_drift = sum D`` against the same permutations. Not part of the registration, a
  persistence-robust drift check compares ``T_drift`` with datasets simulated at ``rho_cal``.
* Grouped diagnostic per source: fully grouped informative sequences against the exact
  Poisson-binomial null of their permutation probabilities ``K! prod c_k! / n!``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from lmaudit.stats.permutation import monte_carlo_pvalue, poisson_binomial_sf, upper_critical_value
from lmaudit.studies.draws.bootstrap import rho_hat_interval
from lmaudit.studies.draws.results import DriftBeyondPersistence, RhoHatInterval
from lmaudit.studies.draws.sequences import SequenceSet, encode, sequence_stats
from lmaudit.studies.draws.simulate import permutation_null, persistence_null

FloatArray = NDArray[np.float64]
TOL = 1e-7  # float noise in sums of rationals (T values are multiples of 1/n)

__all__ = ["AnalysisParams", "ColumnResult", "FamilyAnalysis", "GroupedDiagnostic", "analyze_family", "bound"]


@dataclass(frozen=True)
class AnalysisParams:
    n_perm: int = 10_000
    rho_grid: tuple[float, ...] = tuple(round(0.01 * i, 2) for i in range(51))
    n_sims: int = 500
    power_rhos: tuple[float, ...] = (0.05, 0.1, 0.3)
    alpha: float = 0.05
    grouped_flag_p: float = 0.001
    seed: int = 0


@dataclass(frozen=True)
class GroupedDiagnostic:
    source: str
    n_informative: int
    n_grouped: int
    expected: float  # sum of permutation probabilities of being fully grouped
    pvalue: float  # P(grouped count >= observed) under permutation (exact)
    flagged: bool


def bound(grid: Sequence[float], share_le: FloatArray, level: float) -> tuple[float | None, str, str]:
    """Largest grid ``rho`` with ``share_le >= level``: ``(value, status, label)``."""
    ok = np.flatnonzero(share_le >= level)
    if ok.size == 0:
        return None, "below_grid", f"< {grid[0]:.2f}"
    j = int(ok[-1])
    if j == len(grid) - 1:
        return None, "uninformative", f"> {grid[-1]:.2f}"
    return float(grid[j]), "bounded", f"{grid[j]:.2f}"


@dataclass
class ColumnResult:
    """Every quantity of one column (family, source, or family without flagged sources)."""

    name: str
    n_sequences: int
    n_informative: int
    n_draws: int
    repeats: int
    expected: float
    statistic: float  # T
    pvalue: float
    rho_hat: float | None
    share_le: FloatArray
    rho_upper: float | None
    rho_upper_status: str
    rho_upper_label: str
    rho_cal: float | None
    critical_value: float
    power: dict[float, float]
    drift: float
    drift_pvalue: float
    null_repeats: FloatArray = field(repr=False)
    rho_hat_ci: RhoHatInterval | None = None  # the family column's, given its prompts


@dataclass
class FamilyAnalysis:
    family: ColumnResult
    sources: list[ColumnResult]
    grouped: list[GroupedDiagnostic]
    without_flagged: ColumnResult | None
    drift_robust: DriftBeyondPersistence


def _rng(seed: int, key: str, stream: int) -> np.random.Generator:
    """The generator of one stream of one family: independent of the other families' order."""
    digest = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
    return np.random.default_rng([seed, digest, stream])


def analyze_family(
    name: str,
    sequences: Sequence[Sequence[Hashable]],
    sources: Sequence[str],
    params: AnalysisParams,
    prompts: Sequence[Hashable] | None = None,
) -> FamilyAnalysis:
    """Everything the registration asks of one family (randomness seeded by ``params.seed`` and
    ``name``); with ``prompts`` (one per sequence), the family's ``rho_hat`` also gets its
    bootstrap interval over prompts (:mod:`.bootstrap`, the family's stream 3)."""
    if len(sequences) != len(sources) or (prompts is not None and len(prompts) != len(sequences)):
        raise ValueError("one source (and prompt) per sequence")
    sset = encode(sequences)
    st = sequence_stats(sset)
    src = np.asarray(list(sources), dtype=object)
    names = sorted(set(sources))
    grouped = []
    for s in names:
        m = (src == s) & st.informative
        k = int(st.grouped[m].sum())
        p = poisson_binomial_sf(st.grouped_prob[m], k)
        grouped.append(
            GroupedDiagnostic(
                s, int(m.sum()), k, float(st.grouped_prob[m].sum()), p, p < params.grouped_flag_p
            )
        )
    flagged = {g.source for g in grouped if g.flagged}
    # columns: the family, each source, the family without flagged sources (as sets of sources)
    cols: list[tuple[str, list[int]]] = [(name, list(range(len(names))))]
    cols += [(s, [i]) for i, s in enumerate(names)]
    if flagged:
        cols.append((f"{name} without flagged", [i for i, s in enumerate(names) if s not in flagged]))
    index = {s: i for i, s in enumerate(names)}
    source_id = np.asarray([index[s] for s in sources], dtype=np.int64).reshape(-1)
    inf = st.informative
    sub = sset.subset(inf)

    g = len(names)
    r_src, d_src = permutation_null(
        sub, source_id[inf], n_perm=params.n_perm, rng=_rng(params.seed, name, 0), n_groups=g
    )
    sim_grid = sorted(set(params.rho_grid) | set(params.power_rhos))
    t_src, _ = persistence_null(
        sub, sim_grid, source_id[inf], n_sims=params.n_sims, rng=_rng(params.seed, name, 1), n_groups=g
    )
    on_grid = [sim_grid.index(r) for r in params.rho_grid]

    results: list[ColumnResult] = []
    for cname, ids in cols:
        m = np.isin(source_id, ids)
        r_null, d_null = r_src[:, ids].sum(axis=1), d_src[:, ids].sum(axis=1)
        t_sim = t_src[:, :, ids].sum(axis=2)
        mi = m & inf
        rep = int(st.repeats[mi].sum())
        e0 = float(st.e0[mi].sum())
        t_obs = rep - e0
        room = float(st.room[mi].sum())
        d_const = int(st.drift[m & ~inf].sum())
        d_obs = int(st.drift[m].sum())
        share = (t_sim <= t_obs + TOL).mean(axis=1)
        share_grid = share[on_grid]
        upper, status, label = bound(params.rho_grid, share_grid, params.alpha)
        cal, cal_status, _ = bound(params.rho_grid, share_grid, 0.5)
        crit = upper_critical_value(r_null - e0, params.alpha)
        power = {float(r): float((t_sim[sim_grid.index(r)] > crit + TOL).mean()) for r in params.power_rhos}
        results.append(
            ColumnResult(
                name=cname,
                n_sequences=int(m.sum()),
                n_informative=int(mi.sum()),
                n_draws=int(st.n[m].sum()),
                repeats=rep,
                expected=e0,
                statistic=t_obs,
                pvalue=monte_carlo_pvalue(r_null, rep),
                rho_hat=t_obs / room if room > 0 else None,
                share_le=share_grid,
                rho_upper=upper,
                rho_upper_status=status,
                rho_upper_label=label,
                rho_cal=cal
                if cal is not None
                else (0.0 if cal_status == "below_grid" else float(params.rho_grid[-1])),
                critical_value=crit,
                power=power,
                drift=float(d_obs),
                drift_pvalue=monte_carlo_pvalue(d_null + d_const, d_obs),
                null_repeats=r_null,
            )
        )
    fam = results[0]
    if prompts is not None:
        fam.rho_hat_ci = rho_hat_interval(
            (st.repeats - st.e0).astype(np.float64), st.room, prompts, inf, _rng(params.seed, name, 3)
        )
    excess = float((st.drift[inf] - st.drift_e0[inf]).sum())
    robust = _drift_beyond_persistence(sub, fam, excess, params, name)
    return FamilyAnalysis(
        family=fam,
        sources=results[1 : 1 + len(names)],
        grouped=grouped,
        without_flagged=results[-1] if flagged else None,
        drift_robust=robust,
    )


def _drift_beyond_persistence(
    sub: SequenceSet, fam: ColumnResult, excess: float, params: AnalysisParams, name: str
) -> DriftBeyondPersistence:
    """Excess drift ``sum (D - E[D | counts])`` against datasets simulated at ``rho_cal``
    (persistence, no drift). Not registered: persistence alone inflates ``D`` (runs fall
    unevenly into the two halves), so the registered drift test also answers to persistence."""
    rho = float(fam.rho_cal or 0.0)
    _, d_sim = persistence_null(sub, [rho], n_sims=params.n_sims, rng=_rng(params.seed, name, 2), drift=True)
    assert d_sim is not None
    null = d_sim[0, :, 0]
    p = monte_carlo_pvalue(null, excess, tol=TOL)
    return DriftBeyondPersistence(
        rho=rho, excess=excess, p=p, null_mean=float(null.mean()), n_sims=params.n_sims
    )
