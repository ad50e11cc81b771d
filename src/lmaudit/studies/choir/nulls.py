"""Signal-to-chance against the seed's null: concept occurrences reassigned among the models.

The seed's baseline is "random permutations of concept assignments across models". Read at the
level of the lists: every concept occurrence of every model's (unconditioned) lists is pooled
and dealt back over all (list, rank) slots, each list keeping its length, and each model's
Smith's S, its ranking and the mean pairwise RBO are recomputed from the lists it is dealt
(:func:`reassignment_stc`). A concept's overall frequency survives the deal; which model names
it, and at what rank, does not. As for the ranking-level null
(:func:`lmaudit.stats.salience.signal_to_chance`), the deal is the uniform permutation
conditioned on no list being dealt a concept twice (:func:`lmaudit.stats.rbo.shuffle_assignments`:
repeats would collapse and shorten lists).

Rankings follow :func:`lmaudit.stats.salience.smiths_s` exactly: S summed in integer units of
the lists' common length multiple, ties to more lists, then to the concept seen first (list
order, then rank), so the observed ratio's numerator is ``R_q`` itself (a test).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.stats.rbo import rbo_all_pairs, shuffle_assignments
from lmaudit.stats.salience import SignalToChance, signal_to_chance
from lmaudit.studies.choir.records import finite
from lmaudit.studies.choir.results import QuestionResult
from lmaudit.studies.choir.results.question import SignalToChance as StcRecord

__all__ = [
    "NullCounts",
    "encode_occurrences",
    "null_counts",
    "question_stc",
    "rankings_of",
    "reassignment_stc",
]

IntArray = NDArray[np.int64]
#: integer salience sums must stay exact in float64
_EXACT = 2**53


def encode_occurrences(lists: Sequence[Sequence[int]]) -> tuple[IntArray, int]:
    """Lists of concept ids (non-negative; repeats dropped, first rank kept) as a left-packed
    ``(lists, width)`` array of dense codes, ``-1`` padding; returns it and the number of codes.
    Codes follow the ids' sorted order, so the code numbering carries no list order."""
    rows = [list(dict.fromkeys(int(c) for c in row)) for row in lists]
    ids = sorted({c for row in rows for c in row})
    code = {c: k for k, c in enumerate(ids)}
    width = max((len(r) for r in rows), default=0)
    arr = np.full((len(rows), width), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        arr[i, : len(row)] = [code[c] for c in row]
    return arr, len(ids)


def rankings_of(
    draws: IntArray, owner: IntArray, n_models: int, n_codes: int, depth: int | None, ties: bool = False
) -> tuple[IntArray, IntArray]:
    """Each model's concepts ranked by Smith's S over its lists, for a batch of deals.

    ``draws``: ``(B, lists, width)`` left-packed codes (no repeats within a row); ``owner``: the
    model of each list. Returns ``(B, n_models, D)`` codes, most salient first, ``-1`` padding
    (cut at ``depth``: with ``ties``, the tie groups that start within it), and each entry's tie-group start (the 1-based
    position of the first entry with exactly the same S; ``0`` on padding), as
    :func:`lmaudit.stats.rbo.rbo_all_pairs` takes them."""
    b_n, n_lists, width = draws.shape
    valid = draws >= 0
    lengths = valid.sum(axis=-1)  # (B, lists)
    used = sorted({int(x) for x in np.unique(lengths) if x > 0}) or [1]
    unit = math.lcm(*used)
    per_model = np.bincount(owner, minlength=n_models).max(initial=1)
    exact = unit * width * per_model < _EXACT
    rank = np.arange(width)[None, None, :]
    safe = np.maximum(lengths, 1)[..., None]
    # (L - r + 1) / L in units of 1 / unit: an integer per occurrence (r 1-based)
    weight = (lengths[..., None] - rank) * (unit // safe) if exact else (lengths[..., None] - rank) / safe
    cell = (np.arange(b_n)[:, None, None] * n_models + owner[None, :, None]) * n_codes
    flat = (cell + np.maximum(draws, 0))[valid]
    size = b_n * n_models * n_codes
    total = np.bincount(flat, weights=np.asarray(weight, dtype=np.float64)[valid], minlength=size)
    freq = np.bincount(flat, minlength=size)
    first = np.full(size, n_lists * width, dtype=np.int64)
    seen = (np.arange(n_lists)[None, :, None] * width + rank).repeat(b_n, axis=0)[valid]
    np.minimum.at(first, flat, seen)
    shape = (b_n * n_models, n_codes)
    total, freq, first = total.reshape(shape), freq.reshape(shape), first.reshape(shape)
    present = freq > 0
    # most salient first; ties: more lists, then seen first; absent concepts last
    order = np.lexsort((first, -freq, -total, ~present), axis=-1)
    d = int(present.sum(axis=1).max(initial=0))
    top = order[:, :d]
    keep = np.take_along_axis(present, top, axis=1)
    s_sorted = np.take_along_axis(total, top, axis=1)
    pos = np.arange(1, d + 1)[None, :]
    new = np.ones_like(keep)
    new[:, 1:] = s_sorted[:, 1:] != s_sorted[:, :-1]
    starts = np.where(keep, np.maximum.accumulate(np.where(new, pos, 0), axis=1), 0)
    if depth:  # a depth cut keeps the tie groups that start within it (strict: the cut itself)
        keep &= (starts if ties else pos) <= depth
        d = int(keep.sum(axis=1).max(initial=0))
        keep, top, starts = keep[:, :d], top[:, :d], starts[:, :d]
    ranked = np.where(keep, top, -1)
    starts = np.where(keep, starts, 0)
    shape3 = (b_n, n_models, d)
    return np.asarray(ranked.reshape(shape3), dtype=np.int64), np.asarray(
        starts.reshape(shape3), dtype=np.int64
    )


def _mean_rbo(ranked: tuple[IntArray, IntArray], p: float, ties: bool) -> NDArray[np.float64]:
    ids, starts = ranked
    vals = rbo_all_pairs(ids, p, starts) if ties else rbo_all_pairs(ids, p)
    return np.asarray(np.nanmean(vals, axis=-1), dtype=np.float64)


def reassignment_stc(
    lists: Sequence[Sequence[int]],
    owner: Sequence[int],
    *,
    rng: np.random.Generator,
    n_shuffles: int = 1000,
    p: float = 0.9,
    depth: int | None = None,
    ties: bool = False,
    budget: int = 40_000_000,
) -> SignalToChance:
    """Observed mean pairwise RBO of the models' Smith's S rankings over its mean when every
    concept occurrence is reassigned among the lists (each keeping its length).

    ``lists``: concept-id lists (one per elicited list); ``owner``: the model index of each
    list (``0..M-1``, every model at least one list). Pairs of two empty rankings are left out
    of every mean. ``ties``: concepts of exactly equal S are one tie group in RBO (as the
    observed ``R_q`` is computed); otherwise the strict tie rule orders them. ``budget`` caps the
    deal's working arrays (draws x lists x concepts)."""
    own = np.asarray(owner, dtype=np.int64)
    if own.size != len(lists):
        raise ValueError(f"{len(lists)} lists but {own.size} owners")
    n_models = int(own.max(initial=-1)) + 1
    if n_models < 2 or np.bincount(own, minlength=n_models).min() == 0:
        raise ValueError("reassignment_stc needs at least two models, each with a list")
    arr, n_codes = encode_occurrences(lists)
    observed = float(
        _mean_rbo(rankings_of(arr[None], own, n_models, max(n_codes, 1), depth, ties), p, ties)[0]
    )
    null = np.empty(n_shuffles)
    chunk = max(1, min(n_shuffles, budget // max(1, arr.shape[0] * max(n_codes, 1))))
    for start in range(0, n_shuffles, chunk):
        k = min(chunk, n_shuffles - start)
        draws = shuffle_assignments(arr, k, rng=rng) if arr.size else np.repeat(arr[None], k, axis=0)
        ranked = rankings_of(draws, own, n_models, max(n_codes, 1), depth, ties)
        null[start : start + k] = _mean_rbo(ranked, p, ties)
    return SignalToChance.of(observed, null, n_models, p)


def _record(stc: SignalToChance, null: str) -> StcRecord:
    return StcRecord(
        observed=stc.observed, null_mean=stc.null_mean, ratio=finite(stc.ratio), p=stc.p_value, null=null
    )


def question_stc(
    lists_by_model: Sequence[Sequence[Sequence[int]]],
    rankings: Sequence[Sequence[Any]],
    *,
    rng: np.random.Generator,
    shuffles: int,
    p: float,
    depth: int | None,
) -> tuple[StcRecord | None, StcRecord | None]:
    """A question's ``stc`` (the reassignment null, primary) and ``stc_ranking_shuffle`` (the
    entries of the models' salience rankings dealt across models: the sensitivity), from each
    model's concept lists and its ranking (tie groups as sets), in the same model order."""
    if sum(1 for x in rankings if x) < 2 or shuffles <= 0:
        return None, None
    lists = [lst for per in lists_by_model for lst in per]
    owner = [m for m, per in enumerate(lists_by_model) for _ in per]
    primary = reassignment_stc(lists, owner, rng=rng, n_shuffles=shuffles, p=p, depth=depth, ties=True)
    ranking = signal_to_chance(rankings, rng=rng, n_shuffles=shuffles, p=p)
    return _record(primary, "reassignment"), _record(ranking, "ranking_shuffle")


#: the seed's stricter codebook-test level (section 4.2: 96/97 prompts at p < .001)
STRICT_ALPHA = 0.001


@dataclass(frozen=True)
class NullCounts:
    """The summary's counts under the sensitivity null and of codebook-test rejections."""

    above_chance_ranking_shuffle: int
    above_chance_significant_ranking_shuffle: int
    n_codebook_test: int
    codebook_reject: int
    codebook_reject_001: int


def null_counts(per_q: Mapping[str, QuestionResult], alpha: float) -> NullCounts:
    """Summary counts over the bank's questions: above chance under the ranking-shuffle null
    (the sensitivity), and the questions whose codebook permutation test rejects at ``alpha``
    and at 0.001 (the seed's 97/97 and 96/97 of its analysable prompts, ``n_codebook_test``)."""
    rs = [x for v in per_q.values() if (x := v.stc_ranking_shuffle) and x.above_chance]
    tests = [c for v in per_q.values() if (c := v.codebook_test)]
    return NullCounts(
        above_chance_ranking_shuffle=len(rs),
        above_chance_significant_ranking_shuffle=sum(1 for x in rs if x.p < alpha),
        n_codebook_test=len(tests),
        codebook_reject=sum(1 for x in tests if x.p < alpha),
        codebook_reject_001=sum(1 for x in tests if x.p < STRICT_ALPHA),
    )
