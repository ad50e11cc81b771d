"""Rank-biased overlap (Webber, Moffat & Zobel 2010, ACM TOIS 28(4)), extrapolated: RBO_ext.

For two rankings ``S`` (the shorter, ``s`` items) and ``L`` (``l >= s`` items), let
``X_d = |S:d ∩ L:d|`` be the overlap of their depth-``d`` prefixes, where a prefix deeper than a
list is the whole list. Webber's eq. (32) is

    RBO_ext = (1-p)/p [ sum_{d=1..l} X_d/d p^d + sum_{d=s+1..l} X_s (d-s)/(s d) p^d ]
              + [ (X_l - X_s)/l + X_s/s ] p^l,

which is ``(1-p) sum_{d=1..l} A_d p^(d-1) + A_l p^l`` with the agreement

    A_d = X_d / d                        for d <= s,
    A_d = (X_d + (d-s) X_s/s) / d        for d > s  (the unseen part of S is assumed to agree
                                                     at the rate it agreed at depth s).

For two lists of equal length this is eq. (30), ``(1-p) sum A_d p^(d-1) + A_k p^k``.
``p`` defaults to 0.9, the choir study's setting.

**Ties** (Webber §4.3) are given as sets of equal rank: a ranking is a sequence whose entries
are items or collections of items (a ``set``/``frozenset``/``list``/``tuple`` is one tie group).
A group of ``k`` items occupies ``k`` positions; a prefix of depth ``d`` holds every group that
starts at a position ``<= d``, so ``|S:d|`` can exceed ``d`` inside a tie, and the agreement is
normalised by the prefix sizes (eq. 28): ``A_d = 2 X_d / (|S:d| + |L:d|)`` for ``d <= s``, and
for ``d > s`` (``S`` exhausted) ``A_d = 2 (X_d + (d-s) A_s) / (d + |L:d|)``. Both reduce to the
formulas above when there are no ties. The vectorised routines take strict rankings only.

**Duplicates**: an item listed again (two free-list entries coded to one concept) counts once,
at its first position; later repeats are dropped and the list is shorter by them. **Empty
lists**: RBO of an empty and a non-empty list is 0; of two empty lists it is undefined and
returned as NaN (nothing was listed, so there is no agreement to credit; average with
``np.nanmean``). Results are clipped into [0, 1] only to remove rounding (a few ulp).

**The PyPI ``rbo`` package** (0.1.3, ``RankingSimilarity(S, T).rbo_ext(p)``) implements the
same eq. (32) and agrees with :func:`rbo_ext` to rounding on strict, non-empty rankings of any
lengths (tested). It differs, by design here, where: (i) it refuses repeated items (an
``assert``), so it has neither tie groups nor first-occurrence collapsing; (ii) two empty lists
give 1 there and NaN here; (iii) it clips any value outside [0, 1] with a printed message,
which would hide errors larger than rounding; (iv) its non-extrapolated ``rbo()`` stops at the
shorter list's length (its open issue #19), which we do not offer. Its metadata pins
``numpy<2`` although it runs on numpy 2, so it is installed with ``--no-deps`` (tests only).

The vectorised :func:`rbo_all_pairs` takes lists encoded as integer concept ids in a padded
array (:func:`encode_lists`, ``-1`` pads) with any leading batch axes, e.g. ``(shuffles,
models, depth)``, and returns RBO for every model pair ``i < j`` in ``np.triu_indices`` order;
:func:`shuffle_assignments` draws the signal-to-chance null (concept ids permuted across
models, each model keeping its list length, conditioned on no list being dealt a concept twice).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.stats.exact import powers

__all__ = [
    "EncodedLists",
    "encode_lists",
    "rbo_all_pairs",
    "rbo_ext",
    "shuffle_assignments",
    "tie_groups",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
PAD = -1


def _check_p(p: float) -> None:
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p!r}")


def tie_groups(ranking: Iterable[Any]) -> list[frozenset[Hashable]]:
    """A ranking as tie groups, repeats dropped (first occurrence wins), empty groups removed."""
    seen: set[Hashable] = set()
    groups: list[frozenset[Hashable]] = []
    for entry in ranking:
        members = list(entry) if isinstance(entry, set | frozenset | list | tuple) else [entry]
        fresh: list[Hashable] = []
        for item in members:
            if item not in seen:
                seen.add(item)
                fresh.append(item)
        if fresh:
            groups.append(frozenset(fresh))
    return groups


def _prefix_sizes(groups: list[frozenset[Hashable]], depth: int) -> list[frozenset[Hashable]]:
    """``out[d]`` = the items of the depth-``d`` prefix (``d = 0..depth``): whole groups that start
    at a position ``<= d``; deeper than the list, the whole list."""
    out: list[frozenset[Hashable]] = [frozenset()]
    starts: list[int] = []
    pos = 1
    for g in groups:
        starts.append(pos)
        pos += len(g)
    current: set[Hashable] = set()
    k = 0
    for d in range(1, depth + 1):
        while k < len(groups) and starts[k] <= d:
            current |= groups[k]
            k += 1
        out.append(frozenset(current))
    return out


def rbo_ext(a: Iterable[Any], b: Iterable[Any], p: float = 0.9) -> float:
    """Extrapolated RBO of two rankings (items, or tie groups as sets); see the module notes."""
    _check_p(p)
    ga, gb = tie_groups(a), tie_groups(b)
    na, nb = sum(map(len, ga)), sum(map(len, gb))
    if na == 0 and nb == 0:
        return float("nan")
    if na == 0 or nb == 0:
        return 0.0
    (gs, s), (gl, long_n) = sorted(((ga, na), (gb, nb)), key=lambda t: t[1])
    ps, pl = _prefix_sizes(gs, long_n), _prefix_sizes(gl, long_n)
    pw = powers(p, long_n + 1)
    total = 0.0
    a_s = 0.0
    agreement = 0.0
    for d in range(1, long_n + 1):
        x = len(ps[d] & pl[d])
        if d <= s:
            agreement = 2.0 * x / (len(ps[d]) + len(pl[d]))
            if d == s:
                a_s = agreement
        else:
            agreement = 2.0 * (x + (d - s) * a_s) / (d + len(pl[d]))
        total += (1.0 - p) * pw[d - 1] * agreement
    return float(min(1.0, max(0.0, total + agreement * pw[long_n])))


@dataclass(frozen=True)
class EncodedLists:
    """Strict rankings as integer ids: ``ids[m, r]`` is the id at rank ``r + 1`` of list ``m``
    (``-1`` past its end); ``vocab[id]`` is the item."""

    ids: IntArray
    vocab: tuple[Hashable, ...]

    @property
    def lengths(self) -> IntArray:
        return np.asarray((self.ids >= 0).sum(axis=-1), dtype=np.int64)


def encode_lists(lists: Sequence[Sequence[Hashable]], depth: int | None = None) -> EncodedLists:
    """Encode strict rankings (repeats dropped, first occurrence wins) into a padded id array,
    cut at ``depth`` items when given. Tie groups are refused: encode strict rankings only."""
    vocab: dict[Hashable, int] = {}
    rows: list[list[int]] = []
    for m, items in enumerate(lists):
        row: list[int] = []
        for item in items:
            if isinstance(item, set | frozenset | list | tuple):
                raise ValueError(f"list {m}: tie groups are not supported by the vectorised RBO")
            code = vocab.setdefault(item, len(vocab))
            if code not in row:
                row.append(code)
        rows.append(row if depth is None else row[:depth])
    width = max((len(r) for r in rows), default=0)
    ids = np.full((len(rows), width), PAD, dtype=np.int64)
    for m, row in enumerate(rows):
        ids[m, : len(row)] = row
    return EncodedLists(ids=ids, vocab=tuple(vocab))


def _dedup_rows(ids: IntArray) -> IntArray:
    """Drop repeats within each row (first occurrence wins), compacting rows to the left."""
    out = np.where(_repeats(ids), PAD, ids)
    order = np.argsort(out < 0, axis=-1, kind="stable")
    return np.take_along_axis(out, order, axis=-1)


def rbo_all_pairs(ids: IntArray, p: float = 0.9) -> FloatArray:
    """RBO_ext of every pair ``i < j`` of lists along the second-last axis.

    ``ids``: integer array ``(..., M, depth)`` of strict rankings, ``-1`` after each list's end
    (no repeats within a row; :func:`encode_lists` makes one). Returns ``(..., M (M-1) / 2)`` in
    ``np.triu_indices(M, 1)`` order; NaN where both lists are empty.
    """
    _check_p(p)
    arr = np.asarray(ids, dtype=np.int64)
    if arr.ndim < 2:
        raise ValueError(f"ids must have shape (..., lists, depth), got {arr.shape}")
    batch, (m_lists, width) = arr.shape[:-2], arr.shape[-2:]
    arr = arr.reshape(-1, m_lists, width)
    n_batch = arr.shape[0]
    ii, jj = np.triu_indices(m_lists, 1)
    n_pairs = ii.size
    if n_pairs == 0 or width == 0:
        lengths0 = (arr >= 0).sum(-1)
        both_empty = (lengths0[:, ii] == 0) & (lengths0[:, jj] == 0)
        return np.where(both_empty, np.nan, 0.0).reshape(*batch, n_pairs)
    valid = arr >= 0
    if np.any(valid[..., 1:] & ~valid[..., :-1]):
        raise ValueError("ids: a list has an entry after its end (-1 must only pad the right)")
    lengths = valid.sum(axis=-1)
    n_ids = int(arr.max(initial=-1)) + 2  # one spare column for the padding
    slot = np.where(valid, arr, n_ids - 1)
    big = width + 1
    small = np.int16 if big < np.iinfo(np.int16).max else np.int64  # narrower arrays run faster
    ranks = np.broadcast_to(np.arange(1, width + 1, dtype=small), arr.shape)
    pos = np.full((n_batch, m_lists, n_ids), big, dtype=small)
    np.put_along_axis(pos, slot, ranks, axis=-1)
    pos[..., -1] = big
    # a repeated id overwrote its first position: fewer distinct positions than entries
    if np.any((pos < big).sum(axis=-1) != lengths):
        raise ValueError("ids: a list repeats an id (encode_lists drops repeats)")
    # for the entry at rank r of list i: its rank in list j (big: absent, or past i's end)
    rows_j = (np.arange(n_batch)[:, None] * m_lists + jj[None, :]) * n_ids  # (B, P) offsets into pos
    other = np.take(pos.reshape(-1), rows_j[..., None] + slot[:, ii, :])
    # tables over (rank in i, rank in j), both in 1..big: the depth at which the entry enters
    # both prefixes, and C[that depth - 1] (0 where it never does), for the cumulative weights
    # C[k] = sum_{d<=k} w_d / d, w_d = (1-p) p^(d-1)
    d = np.arange(1, width + 1, dtype=np.float64)
    pw = powers(p, width + 1)  # p**k exactly rounded: NumPy's power differs between processors
    cum = np.concatenate([[0.0], np.cumsum((1.0 - p) * pw[:width] / d)])
    grid = np.arange(big + 1)
    both = np.maximum(grid[:, None], grid[None, :])
    enter_tab = np.where((both < big) & (grid[:, None] > 0), both, big).astype(small)
    cum_tab = np.where(enter_tab < big, cum[np.minimum(both, width) - 1], 0.0)
    # (B, P, width) indices into the tables; a pad of list i has other = big: never entered
    flat = other + (np.arange(1, width + 1, dtype=np.intp) * (big + 1))
    enter = np.take(enter_tab.reshape(-1), flat)
    la, lb = lengths[:, ii], lengths[:, jj]
    s, long_n = np.minimum(la, lb), np.maximum(la, lb)
    # sum_{d<=l} w_d X_d / d, X_d = #{r: enter_r <= d}, is sum_r [enter_r <= l] (C[l] - C[enter_r - 1]);
    # an entry in both lists enters by depth l (both ranks are within their lists)
    x_l = (enter < big).sum(axis=-1)
    head = x_l * cum[long_n] - np.take(cum_tab.reshape(-1), flat).sum(axis=-1)
    x_s = (enter <= s[..., None]).sum(axis=-1)
    a_s = np.where(s > 0, x_s / np.maximum(s, 1), 0.0)
    # past the shorter list: sum_{d=s+1..l} w_d (d - s) / d, tabulated over (s, l)
    g = np.arange(width + 1, dtype=np.float64)
    dd = g[None, None, 1:]
    tail_w = (1.0 - p) * pw[None, None, :width] * (dd - g[:, None, None]) / dd
    inside = (dd > g[:, None, None]) & (dd <= g[None, :, None])
    tail = (tail_w * inside).sum(axis=-1)  # tail[s, l]
    a_l = (x_l + (long_n - s) * a_s) / np.maximum(long_n, 1)
    value = head + a_s * tail[s, long_n] + a_l * pw[long_n]
    value = np.clip(value, 0.0, 1.0)
    value = np.where(s == 0, 0.0, value)
    value = np.where(long_n == 0, np.nan, value)
    return value.reshape(*batch, n_pairs)


def _repeats(ids: IntArray) -> NDArray[np.bool_]:
    """Entries that repeat an earlier entry of their row (a stable sort puts the first first)."""
    order = np.argsort(ids, axis=-1, kind="stable")
    ranked = np.take_along_axis(ids, order, axis=-1)
    again = np.zeros(ids.shape, dtype=bool)
    again[..., 1:] = (ranked[..., 1:] == ranked[..., :-1]) & (ranked[..., 1:] >= 0)
    out = np.empty_like(again)
    np.put_along_axis(out, order, again, axis=-1)
    return out


def _deal(arr: IntArray, n: int, rng: np.random.Generator) -> tuple[IntArray, int]:
    """``n`` random deals of the pooled concepts into lists of the given lengths, no list dealt
    a concept twice. Concepts held by several lists go first, most-held first, each to distinct
    lists drawn without replacement with probability proportional to their free slots
    (Gumbel top-k); the concepts held once then fill the free slots in a uniform random order.
    A copy with no list left to take it is dropped (counted). Returns the deals (entries in
    arbitrary order within each list) and the number of dropped copies."""
    m_lists, width = arr.shape
    valid = arr >= 0
    lengths = valid.sum(axis=1)
    ids, counts = np.unique(arr[valid], return_counts=True)
    out = np.full((n, m_lists, width), PAD, dtype=np.int64)
    fill = np.zeros((n, m_lists), dtype=np.int64)
    dropped = 0
    rows = np.arange(n)
    shared = np.argsort(-counts, kind="stable")
    shared = shared[counts[shared] > 1]
    for c in shared:
        k = int(counts[c])
        free = lengths[None, :] - fill
        with np.errstate(divide="ignore"):
            key = np.log(free) - np.log(-np.log(rng.random((n, m_lists))))
        top = np.argpartition(-key, k - 1, axis=1)[:, :k]  # k lists per deal
        ok = np.take_along_axis(free, top, axis=1) > 0
        dropped += int((~ok).sum())
        r, j = np.broadcast_to(rows[:, None], top.shape)[ok], top[ok]
        out[r, j, fill[r, j]] = ids[c]
        fill[r, j] += 1
    single = ids[counts == 1]
    if single.size:
        # free slots of each deal, in a uniform random order, take the singletons
        slot = np.arange(width)[None, None, :]
        free_slot = (slot >= fill[..., None]) & (slot < lengths[None, :, None])
        order = np.argsort(np.where(free_slot, rng.random(free_slot.shape), 2.0).reshape(n, -1), axis=1)
        take = order[:, : single.size]
        perm = np.argsort(rng.random((n, single.size)), axis=1)
        flat = out.reshape(n, -1)
        got = np.take_along_axis(free_slot.reshape(n, -1), take, axis=1)
        dropped += int((~got).sum())
        np.put_along_axis(flat, take, np.where(got, single[perm], PAD), axis=1)
    return out, dropped


def _swap_chain(draws: IntArray, valid: NDArray[np.bool_], rng: np.random.Generator, steps: int) -> None:
    """``steps`` proposals of the swap chain, in place, in every draw: two filled slots drawn
    uniformly; their concepts are exchanged unless that deals a list a concept it holds. The
    proposal is symmetric, so the chain's stationary law is uniform over the deals with no
    repeats (and, within each list, over orders): the conditional law of a uniform
    permutation given that no list is dealt a concept twice."""
    n, m_lists, width = draws.shape
    slots = np.flatnonzero(valid.ravel())
    if slots.size < 2 or steps <= 0:
        return
    flat = draws.reshape(n, -1)
    n_ids = int(flat.max(initial=-1)) + 1
    held = np.zeros((n, m_lists, n_ids), dtype=bool)
    d_idx = np.repeat(np.arange(n), m_lists * width)
    l_idx = np.tile(np.repeat(np.arange(m_lists), width), n)
    filled = flat.ravel() >= 0
    held[d_idx[filled], l_idx[filled], flat.ravel()[filled]] = True
    rows = np.arange(n)
    for _ in range(steps):
        s1 = slots[rng.integers(slots.size, size=n)]
        s2 = slots[rng.integers(slots.size, size=n)]
        x, y = flat[rows, s1], flat[rows, s2]
        a, b = s1 // width, s2 // width
        ok = (a == b) | ~(held[rows, b, x] | held[rows, a, y])
        r = rows[ok & (x >= 0) & (y >= 0)]
        xa, ya, aa, bb = x[r], y[r], a[r], b[r]
        held[r, aa, xa] = False
        held[r, bb, ya] = False
        held[r, aa, ya] = True
        held[r, bb, xa] = True
        flat[r, s1[r]] = ya
        flat[r, s2[r]] = xa


def shuffle_assignments(ids: IntArray, n: int, *, rng: np.random.Generator, sweeps: float = 1.0) -> IntArray:
    """``n`` null draws of ``(M, depth)`` rankings for the signal-to-chance baseline.

    The concept ids of all lists are pooled and dealt back across lists and ranks, each list
    keeping its length. A plain uniform permutation often deals one list the same concept
    twice, which shortens that list once repeats collapse and biases the null's RBO downwards,
    so the null is the uniform permutation *conditioned on* no list holding a concept twice.
    It is drawn in two steps: a deal that respects the constraint (:func:`_deal`), then
    ``sweeps x entries`` proposals of a swap chain whose stationary law is exactly that
    conditional law (:func:`_swap_chain`), which washes out the deal's own bias. Tests compare
    the draws with the law enumerated on a small case, and the null mean RBO of the default
    (one sweep) with a 16-sweep chain on realistic lists (equal within Monte Carlo error; the
    deal alone was already within it on the three workloads tried). A copy that no list can take
    (a concept pooled more often than there are lists) is dropped. Returns ``(n, M, depth)``,
    each row left-packed, for :func:`rbo_all_pairs`.
    """
    arr = np.asarray(ids, dtype=np.int64)
    if arr.ndim != 2:
        raise ValueError(f"ids must have shape (lists, depth), got {arr.shape}")
    if sweeps < 0:
        raise ValueError(f"sweeps must be >= 0, got {sweeps}")
    valid = arr >= 0
    out, _ = _deal(arr, n, rng)
    # a uniform order within each list (the constraint does not depend on order)
    order = np.argsort(np.where(valid[None], rng.random(out.shape), 2.0), axis=-1)
    out = np.take_along_axis(out, order, axis=-1)
    _swap_chain(out, valid, rng, round(float(sweeps) * int(valid.sum())))
    return _dedup_rows(out)
