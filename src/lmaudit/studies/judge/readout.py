"""The log-prob readout's analysis: pure, readout rows in, the results' ``readout`` section out.

Per condition the mean P(A), P(B), P(TIE) over prompts (each prompt's replicates averaged
first) and the mass off the three labels; against the reference on the same prompts, the mean
shift of each label's probability with its Student-t interval and two-sided p over prompts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lmaudit.results import Interval
from lmaudit.studies.judge.sections import (
    LABELS,
    LabelIntervals,
    LabelProbs,
    LabelPValues,
    OffLabels,
    Readout,
    Shift,
)

__all__ = ["readout_section"]


def _mean_interval(xs: Sequence[float], alpha: float) -> tuple[float, Interval | None, float | None]:
    """The mean of per-prompt values with its Student-t interval and two-sided p against zero
    over prompts (None where fewer than two prompts or no spread leave them undefined)."""
    from scipy import stats  # imported where used: registering the study stays light

    mean = math.fsum(xs) / len(xs)
    if len(xs) < 2 or min(xs) == max(xs):
        return mean, None, None
    res = stats.ttest_1samp(list(xs), 0.0)
    ci = res.confidence_interval(1 - alpha)
    return mean, Interval(float(ci.low), float(ci.high)), float(res.pvalue)


def _label_means(ps: Sequence[Mapping[str, float] | LabelProbs]) -> LabelProbs:
    return LabelProbs(**{v: math.fsum(p[v] for p in ps) / len(ps) for v in LABELS})


def readout_section(
    readouts: Sequence[Mapping[str, Any]], conds: Sequence[str], reference: str, alpha: float
) -> dict[str, Readout]:
    """Per condition the mean P(A), P(B), P(TIE) and the mass off the three labels over prompts
    (each prompt's replicates averaged first) and, against the reference on the same prompts, the
    mean shift of each label's probability with its interval over prompts."""
    by: dict[str, dict[str, list[dict[str, float]]]] = {}
    other: dict[str, dict[str, list[float]]] = {}
    for r in readouts:
        by.setdefault(r["condition"], {}).setdefault(r["item"], []).append(r["probs_original"])
        other.setdefault(r["condition"], {}).setdefault(r["item"], []).append(float(r.get("other") or 0.0))
    out: dict[str, Readout] = {}
    ref = by.get(reference, {})
    for cid in conds:
        items = by.get(cid)
        if not items:
            continue
        mean_item = {i: _label_means(ps) for i, ps in items.items()}
        off = [math.fsum(xs) / len(xs) for xs in other[cid].values()]
        shift = None
        common = [i for i in mean_item if i in ref]
        if cid != reference and common:
            ref_mean = {i: _label_means(ref[i]) for i in common}
            moved = {i: LabelProbs(**{v: mean_item[i][v] - ref_mean[i][v] for v in LABELS}) for i in common}
            per_label = {v: _mean_interval([moved[i][v] for i in common], alpha) for v in LABELS}
            shift = Shift(
                mean=LabelProbs(**{v: per_label[v][0] for v in LABELS}),
                ci=LabelIntervals(**{v: per_label[v][1] for v in LABELS}),
                p=LabelPValues(**{v: per_label[v][2] for v in LABELS}),
                n=len(common),
                interval=f"Student t over prompts, {100 * (1 - alpha):g}%",
                items=moved,
            )
        out[cid] = Readout(
            n_items=len(mean_item),
            mean=_label_means(list(mean_item.values())),
            other=OffLabels(mean=math.fsum(off) / len(off), max=max(off)),
            items=mean_item,
            shift_vs_reference=shift,
        )
    return out
