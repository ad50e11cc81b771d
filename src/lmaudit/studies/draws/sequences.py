"""Answer sequences as integer codes, and their per-sequence statistics (pure numpy).

A sequence of ``n`` answers with counts ``c_k`` has

* ``R``: adjacent repeats, the number of positions ``t`` with ``x[t + 1] == x[t]``;
* ``E0 = sum_k c_k (c_k - 1) / n``: the exact expectation of ``R`` when every ordering of the
  answers is equally likely (given the counts);
* ``D = sum_k (first-half count - second-half count)^2``, the first half being the first
  ``floor(n / 2)`` draws (the drift statistic);
* ``runs``: maximal blocks of equal answers; a sequence is *fully grouped* when
  ``runs == K``, the number of distinct answers (``AAABBB``);
* *informative*: ``K >= 2``. A one-answer sequence has ``R = E0 = n - 1`` and adds nothing.

Answers are coded ``0 .. K - 1`` per sequence in order of first appearance (only equality
matters), and sequences are grouped by length so every operation is a whole-array one.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]
Codes = NDArray[np.signedinteger[Any]]
FloatArray = NDArray[np.float64]

__all__ = [
    "Codes",
    "LengthGroup",
    "SequenceSet",
    "SequenceStats",
    "drift_expectation",
    "encode",
    "first_half_counts",
    "sequence_stats",
]


@dataclass(frozen=True)
class LengthGroup:
    """The sequences of one length ``n``: codes ``(S_g, n)``, counts ``(S_g, K)``."""

    n: int
    codes: Codes  # int8 / int16 / int32, the narrowest that holds K
    counts: IntArray
    index: IntArray  # position of each row in the SequenceSet

    @property
    def k_max(self) -> int:
        return int(self.counts.shape[1])


@dataclass(frozen=True)
class SequenceSet:
    n_sequences: int
    groups: tuple[LengthGroup, ...]

    def subset(self, keep: NDArray[np.bool_]) -> SequenceSet:
        """The sequences where ``keep`` is true, re-indexed ``0 .. kept - 1`` in their order."""
        new_index = np.cumsum(keep) - 1
        groups = []
        for g in self.groups:
            m = keep[g.index]
            if m.any():
                groups.append(LengthGroup(g.n, g.codes[m], g.counts[m], new_index[g.index[m]]))
        return SequenceSet(int(keep.sum()), tuple(groups))


def encode(sequences: Sequence[Sequence[Hashable]]) -> SequenceSet:
    """Code each sequence's answers ``0 .. K - 1`` by first appearance; group by length."""
    by_len: dict[int, list[int]] = {}
    coded: list[list[int]] = []
    for i, seq in enumerate(sequences):
        table: dict[Hashable, int] = {}
        coded.append([table.setdefault(a, len(table)) for a in seq])
        by_len.setdefault(len(seq), []).append(i)
    groups = []
    for n in sorted(by_len):
        idx = np.asarray(by_len[n], dtype=np.int64)
        k_max = max((max(coded[i]) + 1 for i in idx if coded[i]), default=1)
        dtype = np.int8 if k_max <= 127 else np.int16 if k_max <= 32767 else np.int32
        codes = cast(Codes, np.asarray([coded[i] for i in idx], dtype=dtype).reshape(len(idx), n))
        counts = np.zeros((len(idx), k_max), dtype=np.int64)
        for k in range(k_max):
            counts[:, k] = np.count_nonzero(codes == k, axis=1)
        groups.append(LengthGroup(n, codes, counts, idx))
    return SequenceSet(len(sequences), tuple(groups))


def drift_expectation(counts: NDArray[np.int64], n: int) -> FloatArray:
    """``E[D | counts]`` under permutation, per row of ``counts`` ``(rows, K)``, exactly.

    The first-half count of answer ``k`` is hypergeometric (``h = floor(n/2)`` of ``n`` with
    ``c_k`` marked), so ``E[(2a - c)^2] = 4 h (n - h) c (n - c) / (n^2 (n - 1)) + c^2 (2h - n)^2 / n^2``.
    """
    c = counts.astype(np.float64)
    if n <= 1:
        return (c**2).sum(axis=-1)
    h = n // 2
    var = 4.0 * h * (n - h) * c * (n - c) / (n * n * (n - 1.0))
    return (var + c**2 * (2 * h - n) ** 2 / (n * n)).sum(axis=-1)


def first_half_counts(codes: Codes, k_max: int) -> IntArray:
    """Counts of each code among the first ``floor(n / 2)`` draws: ``(rows, k_max)``."""
    h = codes.shape[-1] // 2
    head = codes[..., :h]
    out = np.empty((*codes.shape[:-1], k_max), dtype=np.int64)
    for k in range(k_max):
        out[..., k] = np.count_nonzero(head == k, axis=-1)
    return out


@dataclass(frozen=True)
class SequenceStats:
    """Per-sequence statistics, in the SequenceSet's order."""

    n: IntArray
    k: IntArray  # distinct answers
    repeats: IntArray  # R
    sumsq: IntArray  # sum_k c_k^2
    drift: IntArray  # D
    drift_e0: FloatArray  # E[D | counts] under permutation
    runs: IntArray
    grouped_prob: FloatArray  # P(fully grouped) under permutation: K! prod c_k! / n!

    @property
    def e0(self) -> FloatArray:
        n = self.n.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.n > 0, (self.sumsq - self.n) / np.maximum(n, 1.0), 0.0)

    @property
    def informative(self) -> NDArray[np.bool_]:
        return self.k >= 2

    @property
    def grouped(self) -> NDArray[np.bool_]:
        return self.informative & (self.runs == self.k)

    @property
    def room(self) -> FloatArray:
        """``n - 1 - E0``: the most ``R - E0`` can be (0 for one-answer sequences)."""
        return np.maximum(self.n - 1, 0) - self.e0


def sequence_stats(sset: SequenceSet) -> SequenceStats:
    """R, sum c_k^2, D, runs, K and the grouped probability of every sequence."""
    from scipy.special import gammaln  # imported here: plans and reports do not need scipy

    s = sset.n_sequences
    n, k, rep, sq, dr, runs = (np.zeros(s, dtype=np.int64) for _ in range(6))
    gp = np.zeros(s, dtype=np.float64)
    de0 = np.zeros(s, dtype=np.float64)
    for g in sset.groups:
        i = g.index
        n[i] = g.n
        k[i] = np.count_nonzero(g.counts, axis=1)
        same = np.count_nonzero(g.codes[:, 1:] == g.codes[:, :-1], axis=1) if g.n > 1 else 0
        rep[i] = same
        runs[i] = (g.n - same) if g.n > 0 else 0
        sq[i] = (g.counts**2).sum(axis=1)
        a = first_half_counts(g.codes, g.k_max)
        dr[i] = ((2 * a - g.counts) ** 2).sum(axis=1)
        de0[i] = drift_expectation(g.counts, g.n)
        log_p = gammaln(k[i] + 1.0) + gammaln(g.counts + 1.0).sum(axis=1) - gammaln(g.n + 1.0)
        gp[i] = np.exp(log_p)
    return SequenceStats(n=n, k=k, repeats=rep, sumsq=sq, drift=dr, drift_e0=de0, runs=runs, grouped_prob=gp)
