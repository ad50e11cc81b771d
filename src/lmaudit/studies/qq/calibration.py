"""Calibration of the sampled estimand's decisions on a ground-truth agent: how often the region
misses the truth, how often an item is certified VIOLATED or CONTEXTUAL when its true value
says otherwise (false positives), and how often a truly violating item is certified VIOLATED
(power), per number of draws ``n``.

The truth is an agent's label probabilities (the log-prob records of a ``sim`` agent: exact,
``q = 0`` to machine precision for the projective agent). A replicate draws every position's
``n`` answers as one multinomial over ``(y, n, other)`` with those probabilities, which is the
distribution the ``sim`` backend samples from at temperature 1 and top-p 1 (its draws differ
only in the random numbers), and analyses them exactly as a sampled run does
(:func:`lmaudit.studies.qq.estimation.analyze`). Pure: randomness only through ``seed``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.stats.intervals import bonferroni
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.estimation import analyze
from lmaudit.studies.qq.records import Measurement
from lmaudit.studies.qq.result import QQParams, QQResult
from lmaudit.studies.qq.sampling_error import bounds_per_item, position_bounds

__all__ = ["CalibrationPoint", "calibrate", "draw_sampled", "miss_probability"]


def draw_sampled(truth: Sequence[Measurement], n: int, rng: np.random.Generator) -> list[Measurement]:
    """Sampled records of ``n`` draws at every position of ``truth`` (log-prob records)."""
    pvals = np.array(
        [[m.probs[m.label_of["y"]], m.probs[m.label_of["n"]], 0.0] for m in truth], dtype=np.float64
    )
    pvals[:, 2] = np.clip(1.0 - pvals[:, 0] - pvals[:, 1], 0.0, 1.0)
    pvals /= pvals.sum(axis=1, keepdims=True)
    counts = rng.multinomial(n, pvals)
    out = []
    for m, (k_y, k_n, k_o) in zip(truth, counts.tolist(), strict=True):
        y, no = m.label_of["y"], m.label_of["n"]
        out.append(
            dataclasses.replace(
                m,
                probs={y: k_y / n, no: k_n / n},
                other=k_o / n,
                top_k=[],
                estimand="sampled",
                n_draws=n,
                counts={y: k_y, no: k_n, "other": k_o},
            )
        )
    return out


@dataclass(frozen=True)
class CalibrationPoint:
    """The rates at one ``n`` over ``reps`` replicates; per-item arrays follow ``items``."""

    n: int
    reps: int
    alpha: float
    epsilon: float
    items: tuple[str, ...]
    q_true: NDArray[np.float64]
    gamma_true: NDArray[np.float64]
    violated: NDArray[np.int64]  # replicates with the item VIOLATED
    satisfied: NDArray[np.int64]  # replicates with the item SATISFIED
    contextual: NDArray[np.int64]  # replicates with the item CONTEXTUAL
    missed: NDArray[np.int64]  # replicates whose region missed the truth at some position of the item
    # the same replicates read as exact probabilities (the envelope of the frequencies alone)
    violated_exact: NDArray[np.int64]
    contextual_exact: NDArray[np.int64]

    @property
    def satisfying(self) -> NDArray[np.bool_]:
        """Items whose true ``|q|`` is within the margin (VIOLATED there is a false positive)."""
        return np.abs(self.q_true) <= self.epsilon

    @property
    def noncontextual(self) -> NDArray[np.bool_]:
        return self.gamma_true <= 0.0

    def false_violated_rate(self) -> NDArray[np.float64]:
        """Per item: the share of replicates certifying VIOLATED where QQ holds (``nan`` elsewhere)."""
        return np.where(self.satisfying, self.violated / self.reps, np.nan)

    def false_contextual_rate(self) -> NDArray[np.float64]:
        return np.where(self.noncontextual, self.contextual / self.reps, np.nan)

    def power(self, exact: bool = False) -> float | None:
        """The share of (truly violating item, replicate) pairs certified VIOLATED (``exact``:
        with the frequencies read as exact probabilities)."""
        bad = ~self.satisfying
        hits = self.violated_exact if exact else self.violated
        return float(hits[bad].sum() / (bad.sum() * self.reps)) if bad.any() else None

    def false_positive_rate(self, exact: bool = False) -> float | None:
        """The share of (QQ-satisfying item, replicate) pairs certified VIOLATED."""
        ok = self.satisfying
        hits = self.violated_exact if exact else self.violated
        return float(hits[ok].sum() / (ok.sum() * self.reps)) if ok.any() else None

    def to_json(self) -> dict[str, Any]:
        fv = self.false_violated_rate()
        fc = self.false_contextual_rate()
        return {
            "n": self.n,
            "reps": self.reps,
            "alpha": self.alpha,
            "epsilon": self.epsilon,
            "n_satisfying_items": int(self.satisfying.sum()),
            "n_violating_items": int((~self.satisfying).sum()),
            "max_false_violated_rate": float(np.nanmax(fv)) if self.satisfying.any() else None,
            "max_false_contextual_rate": float(np.nanmax(fc)) if self.noncontextual.any() else None,
            "miss_rate": float(self.missed.sum() / (self.reps * len(self.items))),
            "max_miss_rate": float(self.missed.max() / self.reps),
            "false_positive_rate": self.false_positive_rate(),
            "satisfied_rate": (
                float(self.satisfied[self.satisfying].sum() / (self.satisfying.sum() * self.reps))
                if self.satisfying.any()
                else None
            ),
            "power": self.power(),
            "exact_reading": {
                "false_positive_rate": self.false_positive_rate(exact=True),
                "max_false_contextual_rate": (
                    float(np.nanmax(np.where(self.noncontextual, self.contextual_exact / self.reps, np.nan)))
                    if self.noncontextual.any()
                    else None
                ),
                "power": self.power(exact=True),
            },
        }


def miss_probability(truth: Sequence[Measurement], n: int, alpha: float) -> dict[str, float]:
    """Per item, the exact probability that its region at ``n`` draws misses the truth's ``P(y)``
    at some position: ``1 - prod(1 - m_i)`` over its positions (drawn independently), with ``m_i``
    the binomial probability of the counts whose bounds exclude ``p_i``. For agents without
    unassigned mass (each position a binomial); ValueError otherwise."""
    from scipy.stats import binom

    items = list(dict.fromkeys(m.item for m in truth))
    maps = {it: len({m.mapping for m in truth if m.item == it}) for it in items}
    k = np.arange(n + 1)
    levels = {bonferroni(alpha, bounds_per_item(c)) for c in maps.values()}
    bounds = {a: position_bounds(k, n - k, n, a) for a in levels}  # the bounds of every count
    hit = {it: 1.0 for it in items}
    for m in truth:
        if m.other > 0.0:
            raise ValueError(f"item {m.item!r}: exact miss probabilities need other = 0, got {m.other!r}")
        p = m.p_y / (m.p_y + m.p_n)
        lo, hi = bounds[bonferroni(alpha, bounds_per_item(maps[m.item]))]
        outside = (lo > p) | (hi < p)
        hit[m.item] *= 1.0 - float(binom.pmf(k[outside], n, p).sum())
    return {it: 1.0 - h for it, h in hit.items()}


def _truth(truth: Sequence[Measurement], params: QQParams) -> QQResult:
    return analyze(truth, dataclasses.replace(params, estimand="logprob"))


def _missed(truth: QQResult, result: QQResult) -> NDArray[np.int64]:
    """Per item: 1 when the region of ``result`` excludes the true ``P(y)`` somewhere."""
    assert result.sampling is not None
    out = []
    for t, reg in zip(truth.items, result.sampling.items, strict=True):
        miss = any(
            not b.contains(p.p)
            for m in t.mappings
            for p, b in zip(m.positions, reg.p_bounds[m.mapping], strict=True)
        )
        out.append(int(miss))
    return np.array(out, dtype=np.int64)


def _as_exact(records: Sequence[Measurement], params: QQParams) -> QQResult:
    """The sampled records read as exact probabilities (the frequencies' own envelope)."""
    return analyze(
        [dataclasses.replace(m, estimand="logprob") for m in records],
        dataclasses.replace(params, estimand="logprob"),
    )


def calibrate(
    truth: Sequence[Measurement],
    ns: Sequence[int],
    reps: int,
    params: QQParams,
    seed: int,
    *,
    with_exact: bool = False,
) -> list[CalibrationPoint]:
    """``reps`` replicates of the sampled estimand at every ``n`` of ``ns`` on ``truth``;
    ``with_exact`` also decides each replicate with its frequencies read as exact probabilities
    (``*_exact`` counts; zero otherwise)."""
    exact = _truth(truth, params)
    q_true = np.array([it.q for it in exact.items])
    g_true = np.array([it.gamma for it in exact.items])
    sampled = dataclasses.replace(params, estimand="sampled")
    rng = np.random.default_rng(seed)
    out = []
    for n in ns:
        k = len(exact.items)
        tallies = {name: np.zeros(k, dtype=np.int64) for name in ("v", "s", "c", "m", "ve", "ce")}
        for _ in range(reps):
            records = draw_sampled(truth, n, rng)
            res = analyze(records, sampled)
            tallies["v"] += [it.verdict == env.VIOLATED for it in res.items]
            tallies["s"] += [it.verdict == env.SATISFIED for it in res.items]
            tallies["c"] += [it.gamma_class == env.CONTEXTUAL for it in res.items]
            tallies["m"] += _missed(exact, res)
            if with_exact:
                plain = _as_exact(records, params)
                tallies["ve"] += [it.verdict == env.VIOLATED for it in plain.items]
                tallies["ce"] += [it.gamma_class == env.CONTEXTUAL for it in plain.items]
        out.append(
            CalibrationPoint(
                n=int(n),
                reps=int(reps),
                alpha=params.region_alpha,
                epsilon=params.epsilon,
                items=tuple(it.item for it in exact.items),
                q_true=q_true,
                gamma_true=g_true,
                violated=tallies["v"],
                satisfied=tallies["s"],
                contextual=tallies["c"],
                missed=tallies["m"],
                violated_exact=tallies["ve"],
                contextual_exact=tallies["ce"],
            )
        )
    return out
