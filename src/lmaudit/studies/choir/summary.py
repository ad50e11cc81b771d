"""Across the bank's questions: the width-bin table and the summary counts, shares and means
(:class:`~.results.AcrossQuestions`), from the questions' typed results."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lmaudit.results import Interval
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.echo import echo_mean
from lmaudit.studies.choir.nulls import null_counts
from lmaudit.studies.choir.records import finite
from lmaudit.studies.choir.results import AcrossQuestions, BinMean, QuestionResult, Recovery, WidthBin

__all__ = ["across_questions", "width_bins"]


#: a question's quantity the width bins average (None: the question has none)
_BINNED: tuple[tuple[str, Callable[[QuestionResult], float | None]], ...] = (
    ("unconditioned_rbo", lambda v: v.R_q),
    ("same_persona_rbo", lambda v: v.same_persona_rbo_mean),
    ("stc", lambda v: v.stc_ratio),
    ("relative_lift", lambda v: v.relative_lift),
)


def width_bins(
    per_q: Mapping[str, QuestionResult], s: ChoirStudyConfig, rng: np.random.Generator
) -> tuple[WidthBin, ...]:
    """The questions by width ``W_q`` (lower edges ``s.width_bins``), with each bin's mean
    agreement, signal-to-chance and relative lift and their bootstrap intervals."""
    edges = sorted(s.width_bins)
    rows = []
    for i, lo in enumerate(edges):
        hi = edges[i + 1] if i + 1 < len(edges) else math.inf
        qs = [v for v in per_q.values() if v.width is not None and lo <= v.width < hi]
        means: dict[str, BinMean | None] = {}
        for key, get in _BINNED:
            xs = np.array([x for x in (get(v) for v in qs) if x is not None], dtype=float)
            if xs.size:
                boot = xs[rng.integers(xs.size, size=(s.n_boot, xs.size))].mean(axis=1) if s.n_boot else xs
                means[key] = BinMean(
                    mean=float(xs.mean()),
                    ci=Interval(
                        float(np.quantile(boot, s.alpha / 2)), float(np.quantile(boot, 1 - s.alpha / 2))
                    ),
                )
            else:
                means[key] = None
        rows.append(
            WidthBin(
                lo=float(lo),
                hi=None if hi == math.inf else float(hi),
                n=len(qs),
                unconditioned_rbo=means["unconditioned_rbo"],
                same_persona_rbo=means["same_persona_rbo"],
                stc=means["stc"],
                relative_lift=means["relative_lift"],
            )
        )
    return tuple(rows)


def _mean_or_none(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return float(np.mean(vals)) if vals else None


def across_questions(
    bank_q: Mapping[str, QuestionResult],
    bins: Sequence[WidthBin],
    recover: Mapping[str, Recovery],
    s: ChoirStudyConfig,
    echo_t: float | None,
    degenerate_items: int,
) -> AcrossQuestions:
    """The counts, shares and means over the bank's questions, with the shares and contrasts
    the seed's headline claims are stated in (registered predictions name them)."""
    qs = list(bank_q.values())
    stc = [x for v in qs if (x := v.stc)]
    above = [x for x in stc if x.above_chance]
    lifts = [lift for v in qs if (lift := v.relative_lift) is not None]
    novelty = [v.template_novelty.share for v in qs if v.template_novelty]
    lifted = [b.relative_lift.mean for b in bins if b.n and b.relative_lift]
    model, persona = recover.get("model"), recover.get("persona")
    gap = None
    if model and persona and model.excess is not None and persona.excess is not None:
        gap = model.excess - persona.excess  # each accuracy above its own label-shuffle null mean
    n_q = len(qs)
    nulls = null_counts(bank_q, s.alpha)  # the sensitivity null; codebook-test rejections
    return AcrossQuestions(
        n_questions=n_q,
        n_stc=len(stc),
        above_chance=len(above),
        above_chance_significant=sum(1 for x in above if x.p < s.alpha),
        # section 4.3: prompts whose depth-pressure template names more than 50% novel concepts
        n_template_novelty=len(novelty),
        novelty_over_half=sum(1 for x in novelty if x > 0.5),
        n_lift=len(lifts),
        lift_up=sum(1 for x in lifts if x > 1.0),
        mean_relative_lift=float(np.mean(lifts)) if lifts else None,
        # the share of ranked unconditioned concepts in an exact salience tie (mean over questions)
        salience_tied_share=_mean_or_none([v.salience_ties.tied_share for v in qs]),
        echo_calibrated_threshold=echo_t,
        mean_echo_seed=echo_mean(bank_q, "seed"),
        mean_echo_calibrated=echo_mean(bank_q, "calibrated"),
        mean_echo_lexical=echo_mean(bank_q, "lexical"),
        # over every question analysed: one without a signal-to-chance (or a lift) counts against
        above_chance_share=len(above) / n_q if n_q else None,
        lift_up_share=sum(1 for x in lifts if x > 1.0) / n_q if n_q else None,
        # mean relative lift in the lowest and the highest width bin that hold a question
        lift_low_width=lifted[0] if lifted else None,
        lift_high_width=lifted[-1] if lifted else None,
        recover_excess_gap=finite(gap) if gap is not None else None,
        recover_model_minus_persona=model.accuracy - persona.accuracy if model and persona else None,
        above_chance_ranking_shuffle=nulls.above_chance_ranking_shuffle,
        above_chance_significant_ranking_shuffle=nulls.above_chance_significant_ranking_shuffle,
        n_codebook_test=nulls.n_codebook_test,
        codebook_reject=nulls.codebook_reject,
        codebook_reject_001=nulls.codebook_reject_001,
        n_degenerate_items=degenerate_items,
    )
