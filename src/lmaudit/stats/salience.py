"""Free-list salience and agreement statistics for the choir study (pure functions).

* :func:`smiths_s`: Smith's salience index (seed eq. 1) over a set of ranked lists,
  ``S_i = (1/N) sum_{j: i in L_j} (L_j - R_ij + 1) / L_j``, with ``N`` the number of lists
  (empty lists included: a respondent who listed nothing still counts), ``L_j`` the length of
  list ``j`` and ``R_ij`` the rank of item ``i`` in it. An item listed twice in one list
  counts once, at its first rank, and the list is re-ranked without the repeat. The sums are
  exact (integers over the lcm of the list lengths), so equal S is an exact tie;
  :meth:`Salience.tied_ranking` gives the ranking with such ties as groups (for RBO).
* :func:`prompt_width`: the seed's eq. 2, ``W_q = ln(1 + C_q) (1 - min(R_q, 0.35) / 0.35)``,
  from the number of unconditioned codebook clusters ``C_q`` and the unconditioned mean
  cross-model RBO ``R_q`` (natural logarithm).
* :func:`persona_lift`: same-persona cross-model RBO against the unconditioned one, as an
  absolute difference and as the relative ratio (reported together, as the seed asks).
* :func:`echo_rate`: the share of concepts whose embedding lies within cosine distance
  ``threshold`` (0.2) of any term of the question's vocabulary (dot products exact:
  :func:`lmaudit.stats.exact.unit_dots`; a distance within ``1e-6``, float32 precision, of the
  threshold counts as within it).
* :func:`signal_to_chance`: observed mean pairwise cross-model RBO divided by its mean under
  1,000 shuffles of concept assignments across models (:func:`lmaudit.stats.rbo.shuffle_assignments`).
* :func:`codebook_permutation_test`: the model-by-cluster association (Pearson chi-square of the
  contingency table) against permutations of cluster labels over items, which keep each
  model's item count and each cluster's size.

Randomness comes only from the ``rng`` argument.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.stats.arrays import FloatArray
from lmaudit.stats.exact import unit_dots
from lmaudit.stats.permutation import label_codes, monte_carlo_pvalue
from lmaudit.stats.rbo import encode_lists, rbo_all_pairs, shuffle_assignments

__all__ = [
    "CodebookPermutation",
    "EchoRate",
    "PersonaLift",
    "Salience",
    "SignalToChance",
    "codebook_permutation_test",
    "echo_rate",
    "persona_lift",
    "prompt_width",
    "signal_to_chance",
    "smiths_s",
]

WIDTH_CAP = 0.35
#: distances within this of the echo threshold count as within it: the embeddings are float32
ECHO_TOL = 1e-6


@dataclass(frozen=True)
class Salience:
    """Smith's S per item, most salient first (ties: more lists, then first seen); ``exact``
    holds each S as a fraction."""

    items: tuple[Hashable, ...]
    s: tuple[float, ...]
    frequency: tuple[int, ...]
    n_lists: int
    exact: tuple[Fraction, ...] = ()

    def as_dict(self) -> dict[Hashable, float]:
        return dict(zip(self.items, self.s, strict=True))

    def ranking(self) -> list[Hashable]:
        """Strict: equal S ordered by the tie rule (more lists, then first seen)."""
        return list(self.items)

    def tied_ranking(self) -> list[Hashable | frozenset[Hashable]]:
        """Items of equal S (exactly) as one tie group (a frozenset), the rest as items."""
        out: list[Hashable | frozenset[Hashable]] = []
        k = 0
        while k < len(self.items):
            end = k + 1
            while end < len(self.items) and self.exact[end] == self.exact[k]:
                end += 1
            out.append(self.items[k] if end == k + 1 else frozenset(self.items[k:end]))
            k = end
        return out


def smiths_s(lists: Sequence[Sequence[Hashable]]) -> Salience:
    """Smith's S (seed eq. 1) of every item named in ``lists``, summed exactly (in units of
    ``1 / lcm`` of the list lengths), so that items whose S is equal tie whatever the order of
    the lists, and the tie goes to more lists, then to the item seen first."""
    ranked = [list(dict.fromkeys(raw)) for raw in lists]  # repeats dropped, first rank kept
    unit = math.lcm(*(len(r) for r in ranked if r))
    total: dict[Hashable, int] = {}
    freq: dict[Hashable, int] = {}
    for items in ranked:
        length = len(items)
        for rank, item in enumerate(items, start=1):
            total[item] = total.get(item, 0) + (length - rank + 1) * (unit // length)
            freq[item] = freq.get(item, 0) + 1
    n = len(lists)
    first = {item: k for k, item in enumerate(total)}
    order = sorted(total, key=lambda i: (-total[i], -freq[i], first[i]))
    return Salience(
        items=tuple(order),
        s=tuple(total[i] / (unit * n) for i in order),  # integers: one correctly rounded division
        frequency=tuple(freq[i] for i in order),
        n_lists=n,
        exact=tuple(Fraction(total[i], unit * n) for i in order),
    )


def prompt_width(n_clusters: int, mean_rbo: float, cap: float = WIDTH_CAP) -> float:
    """Seed eq. 2: ``ln(1 + C_q) * (1 - min(R_q, cap) / cap)``."""
    if n_clusters < 0:
        raise ValueError(f"n_clusters must be >= 0, got {n_clusters}")
    if not 0.0 <= mean_rbo <= 1.0:
        raise ValueError(f"mean_rbo must lie in [0, 1], got {mean_rbo!r}")
    return math.log1p(n_clusters) * (1.0 - min(mean_rbo, cap) / cap)


@dataclass(frozen=True)
class PersonaLift:
    unconditioned: float
    same_persona: float
    absolute: float  # same_persona - unconditioned
    relative: float  # same_persona / unconditioned (inf when the baseline is 0 and the lift is not)


def persona_lift(unconditioned: float, same_persona: float) -> PersonaLift:
    """Absolute and relative lift of same-persona cross-model RBO over the unconditioned one."""
    if unconditioned > 0:
        relative = same_persona / unconditioned
    else:
        relative = math.nan if same_persona == 0 else math.inf
    return PersonaLift(unconditioned, same_persona, same_persona - unconditioned, relative)


@dataclass(frozen=True)
class EchoRate:
    rate: float  # n_echo / n (NaN with no concepts)
    n_echo: int
    n: int
    threshold: float
    echo: tuple[bool, ...]  # per concept
    nearest_distance: tuple[float, ...]  # per concept: cosine distance to the closest term


def _unit_rows(x: ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array (rows are embeddings), got shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"{name} has a zero row: it has no direction")
    return np.asarray(arr / norms, dtype=np.float64)


def echo_rate(concepts: ArrayLike, vocabulary: ArrayLike, threshold: float = 0.2) -> EchoRate:
    """Share of concept embeddings within cosine distance ``threshold`` of any vocabulary term."""
    c = _unit_rows(concepts, "concepts")
    v = _unit_rows(vocabulary, "vocabulary") if np.asarray(vocabulary).size else None
    if v is not None and v.shape[1] != c.shape[1]:
        raise ValueError(f"concepts have dimension {c.shape[1]}, vocabulary {v.shape[1]}")
    empty = v is None or c.shape[0] == 0
    nearest = np.full(c.shape[0], np.inf) if empty or v is None else 1.0 - unit_dots(c, v).max(axis=1)
    echo = nearest <= threshold + ECHO_TOL
    n = int(c.shape[0])
    n_echo = int(echo.sum())
    return EchoRate(
        rate=n_echo / n if n else math.nan,
        n_echo=n_echo,
        n=n,
        threshold=threshold,
        echo=tuple(bool(e) for e in echo),
        nearest_distance=tuple(float(x) for x in nearest),
    )


@dataclass(frozen=True)
class SignalToChance:
    observed: float  # mean pairwise RBO of the observed lists
    null_mean: float  # mean of the shuffle means
    ratio: float  # observed / null_mean (> 1: above-chance agreement)
    p_value: float  # Monte Carlo, upper tail
    null: tuple[float, ...]  # per shuffle: mean pairwise RBO
    n_lists: int
    n_pairs: int
    p: float

    @classmethod
    def of(cls, observed: float, null: NDArray[np.float64], n_lists: int, p: float) -> SignalToChance:
        """The ratio, its Monte Carlo p-value and the null's mean from the shuffle means."""
        null_mean = float(null.mean()) if null.size else math.nan
        return cls(
            observed=observed,
            null_mean=null_mean,
            ratio=observed / null_mean if null_mean > 0 else math.inf,
            p_value=monte_carlo_pvalue(null, observed, tol=1e-12) if null.size else math.nan,
            null=tuple(float(x) for x in null),
            n_lists=n_lists,
            n_pairs=n_lists * (n_lists - 1) // 2,
            p=p,
        )


def signal_to_chance(
    lists: Sequence[Sequence[Hashable]],
    *,
    rng: np.random.Generator,
    n_shuffles: int = 1000,
    p: float = 0.9,
    depth: int | None = None,
    chunk: int = 250,
) -> SignalToChance:
    """Observed mean cross-model RBO over its shuffle baseline.

    ``lists``: one ranked concept list per model (e.g. concepts by within-model Smith's S;
    an entry that is a set is a tie group), cut at ``depth`` when given. The null pools every
    (model, position) concept assignment and deals it back across models, each list keeping
    its length and its tie groups (positions), conditioned on no list being dealt a concept
    twice (:func:`lmaudit.stats.rbo.shuffle_assignments`). Pairs of two empty lists are left
    out of every mean.
    """
    enc = encode_lists(lists, depth=depth)
    if enc.ids.shape[0] < 2:
        raise ValueError("signal-to-chance needs at least two lists")
    observed = float(np.nanmean(rbo_all_pairs(enc.ids, p, enc.starts)))
    starts = None if enc.starts is None else enc.starts[None]
    null = np.empty(n_shuffles)
    for start in range(0, n_shuffles, chunk):
        k = min(chunk, n_shuffles - start)
        draws = shuffle_assignments(enc.ids, k, rng=rng)
        null[start : start + k] = np.nanmean(rbo_all_pairs(draws, p, starts), axis=-1)
    return SignalToChance.of(observed, null, enc.ids.shape[0], p)


@dataclass(frozen=True)
class CodebookPermutation:
    statistic: float  # Pearson chi-square of the model x cluster table
    cramers_v: float
    p_value: float  # Monte Carlo, upper tail
    null_mean: float
    n_permutations: int
    n_items: int
    models: tuple[Any, ...]
    clusters: tuple[Any, ...]
    table: tuple[tuple[int, ...], ...]  # observed counts, models x clusters


def _chi2(tables: NDArray[np.int64], rows: FloatArray, cols: FloatArray, n: int) -> FloatArray:
    """Pearson chi-square of tables with fixed margins: ``n (sum O^2 / (r c) - 1)``."""
    expected = np.outer(rows, cols)
    return np.asarray(n * ((tables.astype(np.float64) ** 2 / expected).sum(axis=(-2, -1)) - 1.0))


def codebook_permutation_test(
    models: Sequence[Hashable],
    clusters: Sequence[Hashable],
    *,
    rng: np.random.Generator,
    n_permutations: int = 1000,
    chunk: int = 200,
) -> CodebookPermutation:
    """Is cluster membership associated with the model that produced an item?

    One entry per extracted item: the model that produced it and its codebook cluster (leave
    out unclustered items first). The null permutes cluster labels over items, which keeps
    each model's item count and each cluster's size and breaks the model-cluster link.
    """
    if len(models) != len(clusters):
        raise ValueError(f"{len(models)} model labels but {len(clusters)} cluster labels")
    mi, model_names = label_codes(models)
    ci, cluster_names = label_codes(clusters)
    n, n_m, n_c = mi.size, len(model_names), len(cluster_names)
    if n_m < 2 or n_c < 2:
        raise ValueError("the test needs at least two models and two clusters")
    observed_table = np.bincount(mi * n_c + ci, minlength=n_m * n_c).reshape(n_m, n_c)
    rows = observed_table.sum(axis=1).astype(np.float64)
    cols = observed_table.sum(axis=0).astype(np.float64)
    stat = float(_chi2(observed_table, rows, cols, n))
    null = np.empty(n_permutations)
    for start in range(0, n_permutations, chunk):
        k = min(chunk, n_permutations - start)
        perm = np.argsort(rng.random((k, n)), axis=1)
        flat = np.arange(k)[:, None] * (n_m * n_c) + mi[None, :] * n_c + ci[perm]
        tables = np.bincount(flat.ravel(), minlength=k * n_m * n_c).reshape(k, n_m, n_c)
        null[start : start + k] = _chi2(tables, rows, cols, n)
    return CodebookPermutation(
        statistic=stat,
        cramers_v=math.sqrt(max(stat, 0.0) / (n * (min(n_m, n_c) - 1))),
        p_value=monte_carlo_pvalue(null, stat, tol=1e-9 * max(1.0, abs(stat))),
        null_mean=float(null.mean()) if n_permutations else math.nan,
        n_permutations=n_permutations,
        n_items=n,
        models=model_names,
        clusters=cluster_names,
        table=tuple(tuple(int(x) for x in r) for r in observed_table),
    )
