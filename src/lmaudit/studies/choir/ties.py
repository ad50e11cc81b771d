"""What keeps the codebook's HDBSCAN partition the same on every processor, whatever ties.

HDBSCAN (the ``hdbscan`` package, and scikit-learn's port) builds its cluster tree from the
minimum spanning tree of the mutual reachability distances, whose edges it orders with
NumPy's default (unstable) sort. Equal edges, which the ``sim`` embedder's bag-of-words
distances and every text written more than once make common, then come in the order that
sort leaves them, and that order differs between NumPy's AVX-512 and AVX2 sorting kernels;
the order of equal edges decides the tree, so the partition and the labels followed the
processor (the ``choir_sim`` run: 39 of its 607 measurement records on an AVX-512 host).

So the codebook hands HDBSCAN a matrix without ties, and ``min_samples=1``, under which
HDBSCAN's own mutual reachability of that matrix is the matrix itself (each point's core
distance is then its nearest other point's distance, never above an entry of its column):

* the mutual reachability distance is HDBSCAN's (core distance: the distance to the
  ``min_samples``-th nearest point, the point itself counted first, as ``hdbscan`` computes it),
  of distances already rounded to float32;
* distances below ``FLOOR`` (2**-24, a float32 unit at 1; copies of a text are at 0) are
  ``FLOOR``: HDBSCAN's lambda is ``1 / distance``, infinite at 0, and infinite stabilities
  cannot be compared;
* equal values are told apart by point order: the ``t``-th pair (``i < j`` in row-major order)
  of a set of equal values gets ``t / 2**28`` float32 units in the last place added. That is
  exact in float64, keeps every distinct pair of values in its order (they differ by at least
  one float32 unit) and changes no distance by more than a float32 unit.

Labels are canonical: numbered by the first point that carries them, noise staying -1.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["FLOOR", "canonical_labels", "tie_broken_reachability"]

FLOOR = 2.0**-24
_TIE_BITS = 28  # float64's 53 bits = float32's 24 + 28 for the rank within a tie + 1 spare


def canonical_labels(labels: NDArray[np.integer]) -> NDArray[np.int64]:
    """``labels`` renumbered 0, 1, ... in the order of their first appearance (-1 stays -1)."""
    arr = np.asarray(labels, dtype=np.int64)
    out = np.full(arr.shape, -1, dtype=np.int64)
    new: dict[int, int] = {}
    for i, lab in enumerate(arr.tolist()):
        if lab >= 0:
            out[i] = new.setdefault(lab, len(new))
    return out


def tie_broken_reachability(d: NDArray[np.float64], min_samples: int) -> NDArray[np.float64]:
    """HDBSCAN's mutual reachability of the float32-valued distance matrix ``d`` (zero
    diagonal), floored at :data:`FLOOR`, with every off-diagonal value distinct (ties broken by
    point order, as described above). Symmetric, zero diagonal."""
    n = int(d.shape[0])
    if d.shape != (n, n):
        raise ValueError(f"a distance matrix must be square, got shape {d.shape}")
    if not np.array_equal(d.astype(np.float32).astype(np.float64), d):
        raise ValueError("tie_broken_reachability needs distances rounded to float32")
    if n < 2:
        return np.zeros((n, n))
    core = np.sort(d, axis=0)[min(int(min_samples), n - 1)]
    iu, ju = np.triu_indices(n, 1)
    raw = d[iu, ju]
    vals = np.maximum(np.maximum(np.maximum(raw, core[iu]), core[ju]), FLOOR)
    order = np.lexsort((raw, vals))  # stable: equal values by distance, then in the pairs' order
    ranked = vals[order]
    new_run = np.r_[True, ranked[1:] != ranked[:-1]]
    t = np.arange(ranked.size) - np.maximum.accumulate(np.where(new_run, np.arange(ranked.size), 0))
    if t.size and int(t.max()) >= 2**_TIE_BITS:
        raise ValueError(f"more than 2**{_TIE_BITS} equal distances: too many points to break ties")
    unit = np.spacing(ranked.astype(np.float32)).astype(np.float64)
    out_vals = np.empty_like(vals)
    out_vals[order] = ranked + unit * (t / 2.0**_TIE_BITS)
    out = np.zeros((n, n))
    out[iu, ju] = out_vals
    out[ju, iu] = out_vals
    return out
