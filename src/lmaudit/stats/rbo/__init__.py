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
formulas above when there are no ties. :func:`rbo_all_pairs` takes them as ``starts`` (from
:func:`encode_lists`); the null draws of :func:`shuffle_assignments` keep each list's groups.

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
tie groups enter it as ``starts``, the depth at which each entry enters its list's prefix.
Webber's bounds on the unseen tails (``RBO_min``, the residual, ``RBO_max``) are
:func:`lmaudit.stats.rbo.bounds.rbo_bounds`;
:func:`shuffle_assignments` (:mod:`lmaudit.stats.rbo.null`) draws the signal-to-chance null (concept ids permuted across
models, each model keeping its list length, conditioned on no list being dealt a concept twice).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from lmaudit.stats.arrays import FloatArray, IntArray
from lmaudit.stats.exact import powers
from lmaudit.stats.rbo.null import shuffle_assignments

__all__ = [
    "EncodedLists",
    "encode_lists",
    "rbo_all_pairs",
    "rbo_ext",
    "shuffle_assignments",
    "tie_groups",
    "weight_tables",
]

PAD = -1


_GROUP = (set, frozenset, list, tuple)


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


@lru_cache(maxsize=32)
def weight_tables(p: float, n: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(pw, cum)`` for depths up to ``n``: ``pw[k] = p**k`` (exactly rounded) and
    ``cum[k] = sum_{d<=k} (1-p) p^(d-1) / d``, ``k = 0..n``."""
    pw = powers(p, n + 1)
    cum = np.concatenate([[0.0], np.cumsum((1.0 - p) * pw[:n] / np.arange(1, n + 1))])
    return tuple(pw.tolist()), tuple(cum.tolist())


def _tables(p: float, n: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return weight_tables(p, max(64, 1 << (n - 1).bit_length()))  # a few cached sizes


def _rbo_strict(a: list[Hashable], b: list[Hashable], p: float) -> float:
    """RBO_ext of two non-empty strict rankings without repeats, in closed form: each common
    item adds ``C[l] - C[e-1]`` from the depth ``e`` at which it enters both prefixes."""
    if len(a) > len(b):
        a, b = b, a
    s, n = len(a), len(b)
    pw, cum = _tables(p, n)
    where = dict(zip(b, range(1, n + 1), strict=True))
    head = 0.0
    x_s = x_l = 0
    c_l = cum[n]
    for r, item in enumerate(a, 1):
        j = where.get(item)
        if j is not None:
            e = r if r > j else j
            head += c_l - cum[e - 1]
            x_l += 1
            x_s += e <= s
    a_s = x_s / s
    # sum_{d=s+1..l} (1-p) p^(d-1) (d-s)/d
    tail = (pw[s] - pw[n]) - s * (c_l - cum[s])
    a_l = (x_l + (n - s) * a_s) / n
    return min(1.0, max(0.0, head + a_s * tail + a_l * pw[n]))


def rbo_ext(a: Iterable[Any], b: Iterable[Any], p: float = 0.9) -> float:
    """Extrapolated RBO of two rankings (items, or tie groups as sets); see the module notes."""
    _check_p(p)
    la, lb = list(a), list(b)
    if not any(isinstance(x, _GROUP) for x in la) and not any(isinstance(x, _GROUP) for x in lb):
        da, db = list(dict.fromkeys(la)), list(dict.fromkeys(lb))  # repeats: first rank kept
        if not da or not db:
            return math.nan if not da and not db else 0.0
        return _rbo_strict(da, db, p)
    ga, gb = tie_groups(la), tie_groups(lb)
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
    """Rankings as integer ids: ``ids[m, r]`` is the id at position ``r + 1`` of list ``m``
    (``-1`` past its end); ``vocab[id]`` is the item; ``starts[m, r]`` is the depth at which that
    entry enters the list's prefix (its tie group's first position; ``None``: no ties)."""

    ids: IntArray
    vocab: tuple[Hashable, ...]
    starts: IntArray | None = None

    @property
    def lengths(self) -> IntArray:
        return np.asarray((self.ids >= 0).sum(axis=-1), dtype=np.int64)


def encode_lists(lists: Sequence[Sequence[Any]], depth: int | None = None) -> EncodedLists:
    """Encode rankings (repeats dropped, first occurrence wins; an entry that is a set, list or
    tuple is a tie group) into a padded id array. ``depth`` cuts each list to the groups that
    start at or before it (Webber's prefix: a tie group is never split)."""
    vocab: dict[Hashable, int] = {}
    rows: list[list[int]] = []
    row_starts: list[list[int]] = []
    for items in lists:
        row: list[int] = []
        st: list[int] = []
        for group in tie_groups(items):
            start = len(row) + 1
            if depth is not None and start > depth:
                break
            for item in group if len(group) == 1 else sorted(group, key=str):
                row.append(vocab.setdefault(item, len(vocab)))
                st.append(start)
        rows.append(row)
        row_starts.append(st)
    width = max((len(r) for r in rows), default=0)
    ids = np.full((len(rows), width), PAD, dtype=np.int64)
    starts = np.zeros((len(rows), width), dtype=np.int64)
    for m, row in enumerate(rows):
        ids[m, : len(row)] = row
        starts[m, : len(row)] = row_starts[m]
    tied = any(st[k] != k + 1 for st in row_starts for k in range(len(st)))
    return EncodedLists(ids=ids, vocab=tuple(vocab), starts=starts if tied else None)


def rbo_all_pairs(ids: IntArray, p: float = 0.9, starts: IntArray | None = None) -> FloatArray:
    """RBO_ext of every pair ``i < j`` of lists along the second-last axis.

    ``ids``: integer array ``(..., M, depth)`` of rankings, ``-1`` after each list's end (no
    repeats within a row; :func:`encode_lists` makes one). ``starts`` (broadcastable to
    ``ids``; ``None``: no ties): the depth at which each entry enters its list's prefix, its tie
    group's first position. Returns ``(..., M (M-1) / 2)`` in ``np.triu_indices(M, 1)`` order;
    NaN where both lists are empty.
    """
    _check_p(p)
    arr = np.asarray(ids, dtype=np.int64)
    if arr.ndim < 2:
        raise ValueError(f"ids must have shape (..., lists, depth), got {arr.shape}")
    batch, (m_lists, width) = arr.shape[:-2], arr.shape[-2:]
    n_batch = math.prod(batch)
    arr = arr.reshape(n_batch, m_lists, width)
    ii, jj = np.triu_indices(m_lists, 1)
    n_pairs = ii.size
    if n_pairs == 0 or width == 0 or n_batch == 0:
        lengths0 = (arr >= 0).sum(-1)
        both_empty = (lengths0[:, ii] == 0) & (lengths0[:, jj] == 0)
        return np.where(both_empty, np.nan, 0.0).reshape(*batch, n_pairs)
    valid = arr >= 0
    if np.any(valid[..., 1:] & ~valid[..., :-1]):
        raise ValueError("ids: a list has an entry after its end (-1 must only pad the right)")
    if starts is not None:
        st = np.broadcast_to(np.asarray(starts, dtype=np.int64), (*batch, m_lists, width))
        st = np.where(valid, st.reshape(n_batch, m_lists, width), 0)
        rank = np.arange(1, width + 1)
        prev = np.concatenate([np.zeros_like(st[..., :1]), st[..., :-1]], axis=-1)
        if np.any(valid & (st != rank) & (st != prev)) or np.any(valid[..., 0] & (st[..., 0] != 1)):
            raise ValueError("starts: each entry must start its own group or share the previous one's")
        if np.any(st != np.where(valid, rank, 0)):
            return _all_pairs_tied(arr, st, p, ii, jj).reshape(*batch, n_pairs)
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


def _all_pairs_tied(arr: IntArray, st: IntArray, p: float, ii: IntArray, jj: IntArray) -> FloatArray:
    """:func:`rbo_all_pairs` with tie groups, depth by depth (eq. 28 and its extrapolation, as
    :func:`rbo_ext`): ``A_d = 2 X_d / (|S:d| + |L:d|)`` up to the shorter length ``s``, then
    ``2 (X_d + (d - s) A_s) / (d + |L:d|)``."""
    n_batch, m_lists, width = arr.shape
    valid = arr >= 0
    big = width + 1
    lengths = valid.sum(axis=-1)
    n_ids = int(arr.max(initial=-1)) + 2
    slot = np.where(valid, arr, n_ids - 1)
    entry = np.where(valid, st, big)
    pos = np.full((n_batch, m_lists, n_ids), big, dtype=np.int64)
    np.put_along_axis(pos, slot, entry, axis=-1)
    pos[..., -1] = big
    if np.any((pos < big).sum(axis=-1) != lengths):
        raise ValueError("ids: a list repeats an id (encode_lists drops repeats)")
    rows_j = (np.arange(n_batch)[:, None] * m_lists + jj[None, :]) * n_ids
    other = np.take(pos.reshape(-1), rows_j[..., None] + slot[:, ii, :])
    enter = np.maximum(entry[:, ii, :], other)  # big: absent from j, or a pad of i

    def cumulative(depths: IntArray) -> IntArray:
        """``out[..., d-1]`` = how many of ``depths`` along the last axis are ``<= d``."""
        lead = depths.shape[:-1]
        k = math.prod(lead)
        idx = np.arange(k)[:, None] * (big + 1) + depths.reshape(k, -1)
        counts = np.bincount(idx.ravel(), minlength=k * (big + 1)).reshape(*lead, big + 1)
        return np.asarray(np.cumsum(counts[..., 1:big], axis=-1))

    x = cumulative(enter)  # X_d
    size = cumulative(entry)  # |list:d|
    na, nb = size[:, ii, :], size[:, jj, :]
    la, lb = lengths[:, ii], lengths[:, jj]
    s, long_n = np.minimum(la, lb), np.maximum(la, lb)
    n_long = np.where((la >= lb)[..., None], na, nb)
    d = np.arange(1, width + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        head = 2.0 * x / (na + nb)
        a_s = np.take_along_axis(head, np.maximum(s, 1)[..., None] - 1, axis=-1)
        tail = 2.0 * (x + (d - s[..., None]) * a_s) / (d + n_long)
    agree = np.where(d <= s[..., None], head, np.where(d <= long_n[..., None], tail, 0.0))
    pw = powers(p, width + 1)
    a_l = np.take_along_axis(agree, np.maximum(long_n, 1)[..., None] - 1, axis=-1)[..., 0]
    value = (agree * ((1.0 - p) * pw[:width])).sum(axis=-1) + a_l * pw[long_n]
    value = np.clip(value, 0.0, 1.0)
    value = np.where(s == 0, 0.0, value)
    return np.where(long_n == 0, np.nan, value)
