"""Sampling error of the sampled estimand: a simultaneous confidence region per item, given as
bounds on every position's ``P(y)``, over which the envelope takes ``q``, ``OE_A``, ``OE_B``
and so ``Γ`` (:func:`lmaudit.studies.qq.envelope.box_envelope`).

A sampled position is one multinomial: ``n`` draws, each ``y``, ``n`` or anything else, with
probabilities ``(π_y, π_n, π_o)``. The forced-branch protocol samples every position on its own
(its own seed), and an item's joints are functions of its positions,
``joint_AB(a, b) = P_AB(A_a) P_AB(B_b | A_a)``, so a region on the positions is a region on the
joints. The region is the box

    ``π_y >= L_y`` and ``π_n >= L_n`` at every position of every mapping of the item,

with ``L`` the one-sided exact Clopper-Pearson lower bounds at level ``alpha / (12 · mappings)``
each (Bonferroni over the item's ``2 · 6 · mappings`` bounds). Each bound holds with probability
at least ``1 - alpha / (12 · mappings)`` for every true ``π`` and every ``n`` (Clopper-Pearson is
exact and conservative), and Bonferroni needs no independence, so the whole box holds the truth
with probability at least ``1 - alpha``: every decision of the item (its QQ verdict and its Γ
class, pooled and per mapping) is then right at once.

Inside the box, allocating the unassigned mass as the seed's envelope does puts ``P(y)``
anywhere in ``[π_y, π_y + π_o] = [π_y, 1 - π_n]``, so the union over the region is
``[L_y, 1 - L_n]``: only the lower bounds matter, which is why they are one-sided. With no
non-label draws this is the two-sided Clopper-Pearson interval of ``P(y | y or n)`` at twice the
one-sided level. ``q`` and the order effects are multilinear in the six ``P(y)``, so their exact
ranges over the box are at its 64 vertices; ``Γ`` is then bounded as on log-probs.

Why not a simultaneous multinomial interval on the cells (Goodman, Sison-Glaz): those are
asymptotic and undercover at small ``n`` and near-deterministic cells, the regime the seed's
saturation finding is about (its calibration rejected Wilson intervals for the same reason).

A sampled record without counts (``n`` unknown) carries no sampling information: its ``P(y)``
may be anything, ``[0, 1]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.results import Interval, JsonRecord
from lmaudit.stats.intervals import bonferroni, clopper_pearson

FloatArray = NDArray[np.float64]

__all__ = ["METHOD", "ItemRegion", "SamplingRegion", "bounds_per_item", "position_bounds", "region"]

METHOD = "bonferroni-clopper-pearson"
POSITIONS_PER_MAPPING = 6


def bounds_per_item(n_mappings: int) -> int:
    """How many one-sided bounds an item's region holds: two per position (``y``, ``n``)."""
    return 2 * POSITIONS_PER_MAPPING * n_mappings


def position_bounds(
    k_y: ArrayLike, k_n: ArrayLike, n_draws: ArrayLike, alpha_bound: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """``(L_y, 1 - L_n)``: the range of ``P(y)`` over the region, the one-sided exact lower bounds
    of ``π_y = k_y / n`` and ``π_n = k_n / n`` each at level ``alpha_bound`` (broadcast)."""
    ky, kn, n, a = np.broadcast_arrays(np.asarray(k_y), np.asarray(k_n), np.asarray(n_draws), alpha_bound)
    lo_y = np.empty(ky.shape, dtype=np.float64)
    lo_n = np.empty(ky.shape, dtype=np.float64)
    for level in np.unique(a):
        at = a == level
        # the two-sided interval at 2 * level has the one-sided lower bound at level as its low end
        lo_y[at] = clopper_pearson(ky[at], n[at], 2.0 * float(level))[0]
        lo_n[at] = clopper_pearson(kn[at], n[at], 2.0 * float(level))[0]
    return lo_y, 1.0 - lo_n


class ItemRegion(JsonRecord):
    """One item's region: its bounds' count and level, and each position's ``P(y)`` range."""

    item: str
    n_bounds: int
    alpha_bound: float
    min_draws: int  # the fewest draws at any of its positions
    p_bounds: dict[str, tuple[Interval, ...]]  # mapping -> its six positions' P(y) range


class SamplingRegion(JsonRecord, kw_only=True):
    """How a sampled run's decisions carry sampling error (``results.sampling_error``)."""

    method: str = METHOD
    alpha: float  # family-wise level per item
    scope: str = "item"
    items: tuple[ItemRegion, ...]


def region(
    keys: Sequence[tuple[str, str]], counts: ArrayLike, alpha: float
) -> tuple[FloatArray, FloatArray, SamplingRegion]:
    """``(lo, hi, region)`` for ``R`` rows (item, mapping) of six positions' counts
    ``(k_y, k_n, n_draws)`` (shape ``(R, 6, 3)``; ``n_draws = 0`` for a record without counts);
    rows of one item are consecutive. ``lo``, ``hi`` (``(R, 6)``) bound each ``P(y)``."""
    c = np.asarray(counts, dtype=np.int64)
    if c.shape != (len(keys), POSITIONS_PER_MAPPING, 3):
        raise ValueError(f"counts must have shape ({len(keys)}, 6, 3), got {c.shape}")
    n_maps: dict[str, int] = {}
    for item, _ in keys:
        n_maps[item] = n_maps.get(item, 0) + 1
    per_bound = {item: bonferroni(alpha, bounds_per_item(m)) for item, m in n_maps.items()}
    a = np.array([per_bound[item] for item, _ in keys], dtype=np.float64)[:, None]
    lo, hi = position_bounds(c[..., 0], c[..., 1], c[..., 2], a)
    items: list[ItemRegion] = []
    for item, m in n_maps.items():
        rows = [r for r, (it, _) in enumerate(keys) if it == item]
        items.append(
            ItemRegion(
                item=item,
                n_bounds=bounds_per_item(m),
                alpha_bound=per_bound[item],
                min_draws=int(c[rows, :, 2].min()),
                p_bounds={
                    keys[r][1]: tuple(Interval(float(lo[r, i]), float(hi[r, i])) for i in range(6))
                    for r in rows
                },
            )
        )
    return lo, hi, SamplingRegion(alpha=float(alpha), items=tuple(items))
