"""Like-for-like persona lift and the codebook metric's sensitivity.

Lift: same-persona RBO is measured on the persona template's lists (the seed: template A), one
cell per member and persona. The pooled ``R_q`` pools every unconditioned template, twice the
lists per member with templates A and B, and more lists make a member's salience ranking more
stable, so same / pooled falls below 1 from list count alone. The primary baseline is the mean
pairwise RBO of the members' unconditioned lists of the persona template (same template, same
lists per cell); the pooled ratio is kept as ``pooled``.

Sensitivity: the seed's epsilon 0.3 is a distance in the metric's units; on unit embeddings a
cosine distance ``c`` is the Euclidean distance ``sqrt(2c)``, so the same epsilon under the
Euclidean metric is a cosine distance of 0.045, a much finer codebook. Each question's
codebook is rebuilt under the other metric and ``C_q``, ``R_q`` and ``W_q`` reported for both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.stats.salience import persona_lift, prompt_width
from lmaudit.studies.choir.codebook import Codebook, question_codebook
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord, finite
from lmaudit.studies.choir.results import CodebookMetricSensitivity, QuestionResult
from lmaudit.studies.choir.results.across import MetricMeans
from lmaudit.studies.choir.results.question import (
    Lift,
    LiftBaseline,
    MetricRow,
    MetricSensitivity,
    PooledLift,
)

__all__ = ["lift_block", "metric_sensitivity", "sensitivity_summary", "unconditioned_stats"]

Rank = Callable[[list[list[int]]], list[Any]]
MeanRbo = Callable[[Sequence[Sequence[Any]]], float | None]


def _member_rankings(
    recs: Sequence[ListRecord], concept_of: Mapping[str, int], keep: Callable[[ListRecord], bool], rank: Rank
) -> tuple[list[list[Any]], int]:
    """Each member's salience ranking over its lists that ``keep`` accepts; the lists used."""
    by_m: dict[str, list[list[int]]] = {}
    for r in recs:
        if keep(r):
            c = [concept_of[t] for t in r.items if t in concept_of]
            by_m.setdefault(r.model, []).append(list(dict.fromkeys(c)))
    return [rank(by_m[m]) for m in sorted(by_m)], sum(len(v) for v in by_m.values())


def lift_block(
    recs: Sequence[ListRecord],
    concept_of: Mapping[str, int],
    r_q: float | None,
    same_mean: float | None,
    s: ChoirStudyConfig,
    rank: Rank,
    mean_rbo: MeanRbo,
) -> Lift | None:
    """Absolute and relative lift against the persona template's unconditioned agreement
    (primary) and against the pooled ``R_q`` (``pooled``); ``None`` without a persona."""
    if same_mean is None:
        return None
    t = s.persona_template
    base_rank, n_base = _member_rankings(
        recs, concept_of, lambda r: r.persona == UNCONDITIONED and r.condition == t, rank
    )
    _, n_same = _member_rankings(recs, concept_of, lambda r: r.persona != UNCONDITIONED, rank)
    base = mean_rbo(base_rank)
    lift = persona_lift(base, same_mean) if base is not None else None
    pooled = persona_lift(r_q, same_mean) if r_q is not None else None
    return Lift(
        absolute=float(lift.absolute) if lift is not None else None,
        relative=finite(lift.relative) if lift is not None else None,
        baseline=LiftBaseline(template=t, rbo=base, n_lists=n_base, n_lists_conditioned=n_same),
        pooled=(
            PooledLift(rbo=float(r_q), absolute=float(pooled.absolute), relative=finite(pooled.relative))
            if pooled is not None and r_q is not None
            else None
        ),
    )


def other_metric(s: ChoirStudyConfig) -> ChoirStudyConfig:
    """The study settings with the codebook's other metric (same epsilon)."""
    other = "euclidean" if s.codebook.metric == "cosine" else "cosine"
    return replace(s, codebook=replace(s.codebook, metric=other))


def metric_row(c_q: int, r_q: float | None, s: ChoirStudyConfig) -> MetricRow:
    """``C_q``, ``R_q`` and ``W_q`` of one codebook."""
    return MetricRow(
        C_q=c_q, R_q=r_q, width=float(prompt_width(c_q, r_q, s.width_cap)) if r_q is not None else None
    )


def unconditioned_stats(
    recs: Sequence[ListRecord], cb: Codebook, s: ChoirStudyConfig, rank: Rank, mean_rbo: MeanRbo
) -> MetricRow:
    """``C_q`` (unconditioned clusters), ``R_q`` (pooled unconditioned templates) and ``W_q``."""
    unc = [r for r in recs if r.persona == UNCONDITIONED]
    c_q = len({c for r in unc for t in r.items if (c := cb.concept_of.get(t, -1)) in cb.clustered})
    rankings, _ = _member_rankings(unc, cb.concept_of, lambda r: True, rank)
    return metric_row(c_q, mean_rbo(rankings), s)


def metric_sensitivity(
    recs: Sequence[ListRecord],
    vec: Mapping[str, NDArray[np.float32]],
    primary: MetricRow,
    s: ChoirStudyConfig,
    rank: Rank,
    mean_rbo: MeanRbo,
) -> MetricSensitivity:
    """``C_q``, ``R_q`` and ``W_q`` under both codebook metrics (``primary``: the run's own)."""
    alt = other_metric(s)
    row = unconditioned_stats(recs, question_codebook(recs, vec, alt), alt, rank, mean_rbo)
    by_metric = {s.codebook.metric: primary, alt.codebook.metric: row}
    return MetricSensitivity(
        primary=s.codebook.metric, cosine=by_metric["cosine"], euclidean=by_metric["euclidean"]
    )


def _mean_of(xs: Sequence[float | int | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _means(rows: Sequence[MetricRow]) -> MetricMeans:
    return MetricMeans(
        mean_C_q=_mean_of([r.C_q for r in rows]),
        mean_R_q=_mean_of([r.R_q for r in rows]),
        mean_width=_mean_of([r.width for r in rows]),
    )


def sensitivity_summary(
    per_q: Mapping[str, QuestionResult], s: ChoirStudyConfig
) -> CodebookMetricSensitivity | None:
    """Mean ``C_q``, ``R_q`` and ``W_q`` per metric over the questions, with the epsilon."""
    rows = [v.metric_sensitivity for v in per_q.values() if v.metric_sensitivity]
    if not rows:
        return None
    return CodebookMetricSensitivity(
        primary=s.codebook.metric,
        epsilon=float(s.codebook.cluster_selection_epsilon),
        n_questions=len(rows),
        cosine=_means([r.cosine for r in rows]),
        euclidean=_means([r.euclidean for r in rows]),
        n_C_q_differs=sum(1 for r in rows if r.cosine.C_q != r.euclidean.C_q),
    )
