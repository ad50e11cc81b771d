"""Vectorised Monte Carlo engines of the draws study (pure numpy, explicit ``rng``).

* :func:`permutation_null`: ``B`` joint permutations, each shuffling every sequence
  independently (a column-wise Fisher-Yates over many datasets at once); returns, per
  permutation and per group of sequences, the summed repeats ``R*`` and summed drift ``D*``.
  Groups (a family's sources) let one set of permutations serve the family, each source and
  the family without flagged sources (sums of group columns).
* :func:`persistence_null`: synthetic datasets under the persistence model (each draw repeats
  the previous answer with probability ``rho``, else is a fresh draw from the sequence's
  observed shares), for a grid of ``rho`` with common random numbers: the same uniforms
  decide "copy" (``u < rho``) at every ``rho``, so a dataset at a larger ``rho`` copies at a
  superset of positions. A fresh draw from the observed shares is the answer at a uniformly
  chosen position of the observed sequence. Returns the summed ``T = sum (R - E0)`` (and the
  excess drift ``sum (D - E[D | counts])`` if asked) per dataset and group.
* :func:`draw_persistent`: planted data (true shares, optional linear drift) for tests,
  demos and benchmarks.

Work is chunked to about ``CHUNK_ELEMS`` answers per array; the chunk size is fixed, so
results depend only on the inputs and the generator's state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.studies.draws.sequences import Codes, LengthGroup, SequenceSet, drift_expectation

FloatArray = NDArray[np.float64]

__all__ = ["CHUNK_ELEMS", "draw_persistent", "permutation_null", "persistence_null", "shuffle_columns"]

CHUNK_ELEMS = 1 << 21
_ONE_PASS_PER_CODE = 10  # up to this many distinct answers, count with one pass per answer, else bincount


def _groups(
    sset: SequenceSet, groups: ArrayLike | None, n_groups: int | None
) -> tuple[NDArray[np.int64], int]:
    g = np.zeros(sset.n_sequences, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    if g.shape != (sset.n_sequences,) or (g.size and g.min() < 0):
        raise ValueError(f"groups must be {sset.n_sequences} non-negative group ids, got shape {g.shape}")
    least = int(g.max()) + 1 if g.size else 1
    if n_groups is not None and n_groups < least:
        raise ValueError(f"n_groups = {n_groups} but group ids reach {least - 1}")
    return g, least if n_groups is None else n_groups


class _Summer:
    """Per-group sums over the columns of ``(m, S_g)`` blocks (sequences sorted by group once)."""

    def __init__(self, group_ids: NDArray[np.int64]):
        self.order = np.argsort(group_ids, kind="stable")
        self.ids, self.starts = np.unique(group_ids[self.order], return_index=True)

    def __call__(self, values: NDArray[Any]) -> tuple[NDArray[np.int64], FloatArray]:
        v = np.asarray(values, dtype=np.float64)[:, self.order]
        return self.ids, np.add.reduceat(v, self.starts, axis=1)


def _chunks(total: int, group: LengthGroup) -> list[tuple[int, int]]:
    per = max(1, CHUNK_ELEMS // max(1, group.codes.shape[0] * group.n))
    return [(s, min(total, s + per)) for s in range(0, total, per)]


def _column_counts(x: Codes, k_max: int) -> NDArray[np.int64]:
    """Counts of codes ``0 .. k_max - 1`` in each column of ``x`` ``(n, rows)``, as ``(rows, k_max)``."""
    rows = x.shape[1]
    if k_max <= _ONE_PASS_PER_CODE:
        out = np.empty((rows, k_max), dtype=np.int64)
        for k in range(k_max):
            out[:, k] = (x == k).sum(axis=0, dtype=np.int32)
        return out
    flat = (x + np.arange(rows, dtype=np.int64) * k_max).reshape(-1)
    return np.bincount(flat, minlength=rows * k_max).reshape(rows, k_max)


def shuffle_columns(x: Codes, rng: np.random.Generator) -> None:
    """Shuffle every column of ``x`` ``(n, rows)`` independently and uniformly, in place.

    Fisher-Yates run on all columns at once: for ``j = n - 1 .. 1``, swap row ``j`` with row
    ``r ~ U{0..j}`` (one exact bounded integer per column).
    """
    n, rows = x.shape
    flat = x.reshape(-1)
    cols = np.arange(rows, dtype=np.intp)
    for j in range(n - 1, 0, -1):
        idx = rng.integers(0, j + 1, size=rows) * rows
        idx += cols
        tmp = flat[idx]
        flat[idx] = x[j]
        x[j] = tmp


def permutation_null(
    sset: SequenceSet,
    groups: ArrayLike | None = None,
    *,
    n_perm: int,
    rng: np.random.Generator,
    n_groups: int | None = None,
) -> tuple[FloatArray, FloatArray]:
    """``(R*, D*)``, each ``(n_perm, G)``: per permutation, sums over the sequences of each group
    (``groups``: one id ``0 .. G - 1`` per sequence, default one group; ``G`` = ``n_groups``
    or the largest id + 1)."""
    gid, n_groups = _groups(sset, groups, n_groups)
    r_out = np.zeros((n_perm, n_groups))
    d_out = np.zeros((n_perm, n_groups))
    for g in sset.groups:
        s_g, n = g.codes.shape
        summer = _Summer(gid[g.index])
        codes_t = np.ascontiguousarray(g.codes.T)  # (n, S_g)
        for lo, hi in _chunks(n_perm, g):
            m = hi - lo
            # a fresh copy per chunk (a chunk of one permutation would otherwise be a read-only view)
            copies = np.empty((n, m, s_g), dtype=codes_t.dtype)
            copies[...] = codes_t[:, None, :]
            x = copies.reshape(n, m * s_g)
            shuffle_columns(x, rng)
            rep = np.count_nonzero(x[1:] == x[:-1], axis=0)
            a = _column_counts(x[: n // 2], g.k_max)
            counts = np.broadcast_to(g.counts, (m, s_g, g.k_max)).reshape(m * s_g, g.k_max)
            drift = ((2 * a - counts) ** 2).sum(axis=1)
            ids, sums = summer(rep.reshape(m, s_g))
            r_out[lo:hi, ids] += sums
            ids, sums = summer(drift.reshape(m, s_g))
            d_out[lo:hi, ids] += sums
    return np.rint(r_out), np.rint(d_out)


def persistence_null(
    sset: SequenceSet,
    rhos: Sequence[float],
    groups: ArrayLike | None = None,
    *,
    n_sims: int,
    rng: np.random.Generator,
    drift: bool = False,
    n_groups: int | None = None,
) -> tuple[FloatArray, FloatArray | None]:
    """``T`` of synthetic persistent datasets, ``(len(rhos), n_sims, G)``, and, if ``drift``,
    the excess drift ``sum (D - E[D | counts])`` of the same datasets."""
    gid, n_groups = _groups(sset, groups, n_groups)
    grid = [float(r) for r in rhos]
    if any(not 0.0 <= r <= 1.0 for r in grid):
        raise ValueError(f"rho values must lie in [0, 1], got {grid}")
    t_out = np.zeros((len(grid), n_sims, n_groups))
    d_out = np.zeros_like(t_out) if drift else None
    for g in sset.groups:
        s_g, n = g.codes.shape
        summer = _Summer(gid[g.index])
        flat_codes = g.codes.reshape(-1)
        for lo, hi in _chunks(n_sims, g):
            m = hi - lo
            rows = m * s_g
            copy_u = rng.random((n, rows))
            base = np.tile(np.arange(s_g, dtype=np.int64) * n, m)
            fresh = flat_codes[base[None, :] + rng.integers(0, n, size=(n, rows))]
            x = np.empty_like(fresh)
            for j, rho in enumerate(grid):
                x[0] = fresh[0]
                copy = copy_u < rho
                for t in range(1, n):
                    x[t] = np.where(copy[t], x[t - 1], fresh[t])
                rep = np.count_nonzero(x[1:] == x[:-1], axis=0)
                counts = _column_counts(x, g.k_max)
                e0 = ((counts**2).sum(axis=1) - n) / n
                ids, sums = summer((rep - e0).reshape(m, s_g))
                t_out[j][lo:hi, ids] += sums
                if d_out is not None:
                    a = _column_counts(x[: n // 2], g.k_max)
                    d = ((2 * a - counts) ** 2).sum(axis=1) - drift_expectation(counts, n)
                    ids, sums = summer(d.reshape(m, s_g))
                    d_out[j][lo:hi, ids] += sums
    return t_out, d_out


def draw_persistent(
    shares: ArrayLike,
    lengths: Sequence[int],
    rho: float,
    *,
    rng: np.random.Generator,
    shares_end: ArrayLike | None = None,
) -> list[NDArray[np.int64]]:
    """Planted sequences: draw 0 from the shares, then repeat the previous answer with
    probability ``rho``, else draw afresh. Shares are ``(K,)`` or one row per sequence
    ``(S, K)``; with ``shares_end`` they move linearly from ``shares`` (first draw) to
    ``shares_end`` (last draw) over each sequence."""
    lengths = [int(n) for n in lengths]
    p0 = np.broadcast_to(
        np.atleast_2d(np.asarray(shares, dtype=np.float64)), (len(lengths), np.shape(shares)[-1])
    )
    p1 = (
        p0
        if shares_end is None
        else np.broadcast_to(np.atleast_2d(np.asarray(shares_end, dtype=np.float64)), p0.shape)
    )
    out: list[NDArray[np.int64]] = []
    for i, n in enumerate(lengths):
        tau = np.arange(n) / max(n - 1, 1)
        p = (1.0 - tau)[:, None] * p0[i] + tau[:, None] * p1[i]
        cum = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
        u = rng.random(n)
        fresh = np.minimum((cum < u[:, None]).sum(axis=1), p.shape[1] - 1)
        copy = rng.random(n) < rho
        x = fresh.copy()
        for t in range(1, n):
            if copy[t]:
                x[t] = x[t - 1]
        out.append(x.astype(np.int64))
    return out
