"""QQ diagnostics beside the verdicts: saturation, memorization alert, Prop. 5 discriminant
fits, sampled-estimand intervals and the logprob-vs-sampling cross-check (gate G3).

Pure functions of arrays or records; each returns a small result dataclass with ``to_json``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.results import JsonRecord
from lmaudit.stats.intervals import bonferroni, clopper_pearson
from lmaudit.studies.qq.config import QQStudyConfig
from lmaudit.studies.qq.records import Measurement

FloatArray = NDArray[np.float64]

__all__ = [
    "FitResult",
    "G3Result",
    "MemorizationPair",
    "MemorizationResult",
    "SampledInterval",
    "SaturationCount",
    "discriminant_fits",
    "distance_from_determinism",
    "fit_through_origin",
    "g3_check",
    "is_saturated",
    "memorization_alert",
    "n_saturated_positions",
    "sampled_counts",
    "sampled_intervals",
]


# ---------------------------------------------------------------- saturation


def distance_from_determinism(p: ArrayLike) -> FloatArray:
    """``d = 1 - max(p, 1 - p)``: the minority-answer probability (0 = deterministic)."""
    pf = np.asarray(p, dtype=np.float64)
    return 1.0 - np.maximum(pf, 1.0 - pf)


def n_saturated_positions(p: ArrayLike, threshold: float = QQStudyConfig.saturation_threshold) -> int:
    """How many positions have ``max(p, 1 - p) > threshold``."""
    pf = np.asarray(p, dtype=np.float64)
    return int(np.count_nonzero(np.maximum(pf, 1.0 - pf) > threshold))


class SaturationCount(JsonRecord):
    """Items saturated at one threshold."""

    threshold: float
    n_saturated: int


def is_saturated(p: ArrayLike, threshold: float = QQStudyConfig.saturation_threshold) -> bool:
    """An item is saturated if strictly more than half of its positions are near-deterministic."""
    n = np.size(p)
    return n > 0 and 2 * n_saturated_positions(p, threshold) > n


# ---------------------------------------------------------------- memorization


class MemorizationPair(JsonRecord):
    s1: str
    s2: str
    oss_s1: float
    oss_s2: float
    abs_diff: float  # |oss_s1 - oss_s2|
    exceeds: bool  # abs_diff > the alert's threshold


class MemorizationResult(JsonRecord):
    """Descriptive alert: ``|OSS_S1 - OSS_S2| > threshold`` on at least ``min_pairs`` pairs."""

    threshold: float
    min_pairs: int
    n_pairs: int
    n_exceeding: int
    alert: bool
    pairs: tuple[MemorizationPair, ...]
    missing: tuple[tuple[str, str], ...]  # (s1, s2) pairs with an item absent from the results


def memorization_alert(
    oss: Mapping[str, float],
    pairs: Mapping[str, str],
    threshold: float = 0.3,
    min_pairs: int = 2,
) -> MemorizationResult:
    """Compare pooled OSS of matched items; ``pairs`` maps each S2 item id to its S1 item id.

    Pairs with either item missing from ``oss`` are listed in ``missing`` and not counted.
    """
    found: list[MemorizationPair] = []
    missing: list[tuple[str, str]] = []
    for s2, s1 in pairs.items():
        if s1 in oss and s2 in oss:
            a, b = float(oss[s1]), float(oss[s2])
            diff = abs(a - b)
            found.append(MemorizationPair(s1, s2, a, b, diff, diff > threshold))
        else:
            missing.append((s1, s2))
    n_exceeding = sum(p.exceeds for p in found)
    return MemorizationResult(
        float(threshold),
        int(min_pairs),
        len(found),
        n_exceeding,
        n_exceeding >= min_pairs,
        tuple(found),
        tuple(missing),
    )


# ---------------------------------------------------------------- Prop. 5 fits


class FitResult(JsonRecord):
    """Least-squares fit ``q ≈ k x`` through the origin across the items of a stratum.

    ``rmse = sqrt(mean((q - k x)²))``; ``r2 = 1 - Σ(q - k x)² / Σ q²`` (uncentred; ``None``
    when every ``q`` is 0). ``decision`` is ``"rejected"`` when ``rmse > epsilon`` (the
    closed form misses the observed ``q`` by more than the QQ equivalence margin on
    average), else ``"compatible"``. ``k`` is 0 when every ``x`` is 0.
    """

    stratum: str
    family: str  # "polarity" (x = u - v) | "position" (x = S)
    n: int
    k: float
    rmse: float
    r2: float | None
    epsilon: float
    decision: str  # "rejected" when rmse > epsilon, else "compatible"


def _fsum(values: NDArray[np.float64]) -> float:
    """The correctly rounded sum of ``values``, whatever the processor."""
    return math.fsum(values.tolist())


def fit_through_origin(
    x: ArrayLike, q: ArrayLike, *, epsilon: float = QQStudyConfig.epsilon, family: str = "", stratum: str = ""
) -> FitResult:
    xf = np.asarray(x, dtype=np.float64).ravel()
    qf = np.asarray(q, dtype=np.float64).ravel()
    if xf.shape != qf.shape or xf.size == 0:
        raise ValueError(f"fit needs equally many x and q values (>0), got {xf.size} and {qf.size}")
    # sums taken exactly (math.fsum of element-wise products): a BLAS dot product's last bits
    # follow the kernel the processor selects (k, rmse and r2 differed in their last digits
    # between an AVX2 and an AVX-512 host)
    sxx = _fsum(xf * xf)
    k = _fsum(xf * qf) / sxx if sxx > 0 else 0.0
    ss_res = _fsum((qf - k * xf) ** 2)
    sqq = _fsum(qf * qf)
    rmse = float(np.sqrt(ss_res / xf.size))
    return FitResult(
        stratum=stratum,
        family=family,
        n=int(xf.size),
        k=k,
        rmse=rmse,
        r2=(1.0 - ss_res / sqq) if sqq > 0 else None,
        epsilon=float(epsilon),
        decision="rejected" if rmse > epsilon else "compatible",
    )


def discriminant_fits(
    q: ArrayLike, u: ArrayLike, v: ArrayLike, *, epsilon: float = QQStudyConfig.epsilon, stratum: str = ""
) -> tuple[FitResult, FitResult]:
    """Prop. 5 closed forms: polarity-dependent ``q ≈ k (u - v)``, position-dependent ``q ≈ k S``.

    ``u = p_AB(A_y)``, ``v = p_BA(B_y)``, ``S = u(1 - v) + (1 - u) v``, per item (pooled).
    """
    uf, vf = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
    s = uf * (1 - vf) + (1 - uf) * vf
    return (
        fit_through_origin(uf - vf, q, epsilon=epsilon, family="polarity", stratum=stratum),
        fit_through_origin(s, q, epsilon=epsilon, family="position", stratum=stratum),
    )


# ---------------------------------------------------------------- sampled estimand


class SampledInterval(JsonRecord):
    """Exact Clopper-Pearson interval for ``P(y | y or n)`` at one sampled position."""

    item: str
    mapping: str
    order: str
    position: int
    first_answer: str | None
    k: int  # draws answered y
    n: int  # draws answered y or n
    n_other: int  # draws answered anything else
    estimate: float | None  # k / n (None: no draw on either label)
    low: float
    high: float
    alpha: float


def sampled_counts(m: Measurement) -> tuple[int, int, int]:
    """``(k_y, k_n, k_other)`` of a sampled record (semantic via ``label_of``)."""
    where = f"item {m.item!r}, mapping {m.mapping!r}, order {m.order!r}, position {m.position}"
    if m.counts is None:
        raise ValueError(f"{where}: sampled record without counts")
    try:
        k_y, k_n = int(m.counts.get(m.label_of["y"], 0)), int(m.counts.get(m.label_of["n"], 0))
    except KeyError as exc:
        raise ValueError(f"{where}: label_of lacks semantic option {exc}") from None
    total = m.n_draws if m.n_draws is not None else int(sum(m.counts.values()))
    k_other = total - k_y - k_n
    if min(k_y, k_n, k_other) < 0:
        raise ValueError(f"{where}: inconsistent counts {m.counts} for n_draws={m.n_draws}")
    return k_y, k_n, k_other


def sampled_intervals(measurements: Iterable[Measurement], alpha: float = 0.05) -> list[SampledInterval]:
    """One interval per sampled record that carries counts, in input order."""
    out: list[SampledInterval] = []
    for m in measurements:
        if m.estimand != "sampled" or m.counts is None:
            continue
        k_y, k_n, k_other = sampled_counts(m)
        n = k_y + k_n
        lo, hi = clopper_pearson(k_y, n, alpha)
        estimate = k_y / n if n > 0 else None
        out.append(
            SampledInterval(
                m.item,
                m.mapping,
                m.order,
                m.position,
                m.first_answer,
                k_y,
                n,
                k_other,
                estimate,
                lo,
                hi,
                alpha,
            )
        )
    return out


# ---------------------------------------------------------------- gate G3


@dataclass(frozen=True)
class G3Result:
    """Logprob joint vs sampled joint of one item-order; arrays are ``[first, second]``, 0 = y."""

    logprob_joint: FloatArray
    counts: NDArray[np.int64]
    alpha: float  # family level per item-order
    alpha_cell: float  # Bonferroni level per joint cell
    low: FloatArray
    high: FloatArray

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def inside(self) -> NDArray[np.bool_]:
        return (self.low <= self.logprob_joint) & (self.logprob_joint <= self.high)

    @property
    def passed(self) -> bool:
        return bool(np.all(self.inside))


def g3_check(logprob_joint: ArrayLike, counts: ArrayLike, alpha: float = 0.01) -> G3Result:
    """Gate G3 for one item-order: does each logprob joint cell lie in its exact interval?

    ``counts`` are the accepted sampled trajectories per joint cell (both answers canonical
    labels), ``logprob_joint`` the binary-conditioned logprob joint, both 2x2 in
    presentation order. Per-cell Clopper-Pearson intervals at ``alpha / 4`` (Bonferroni
    over the four cells), so the family-wise level per item-order is ``alpha``.
    """
    joint = np.asarray(logprob_joint, dtype=np.float64)
    c = np.asarray(counts)
    if joint.shape != (2, 2) or c.shape != (2, 2):
        raise ValueError(f"G3 needs 2x2 joint and counts, got shapes {joint.shape} and {c.shape}")
    if np.any(~np.isfinite(joint)) or np.any(joint < 0) or np.any(joint > 1):
        raise ValueError(f"logprob joint must hold probabilities, got {joint.tolist()}")
    if np.any(c < 0) or np.any(np.mod(c, 1) != 0) or c.sum() == 0:
        raise ValueError(f"counts must be non-negative integers with a positive total, got {c.tolist()}")
    c_int = c.astype(np.int64)
    alpha_cell = bonferroni(alpha, 4)
    lo, hi = clopper_pearson(c_int, np.full_like(c_int, c_int.sum()), alpha_cell)
    return G3Result(joint, c_int, float(alpha), alpha_cell, lo, hi)
