"""Salience per elicitation condition, and the template and temperature contrasts (section 3).

The seed elicits each member's lists under controlled changes of template and temperature and
compares salience "across models, personas, temperatures, and prompt variants". The main
analysis pools a member's unconditioned templates and all temperatures into one ranking; here
each cell is kept apart: a member's lists of one condition (a template for unconditioned
lists, a persona for conditioned ones) at one temperature.

Per question:

- ``cells``: each (member, condition, temperature) with its number of lists (a persona's
  condition is ``<template>|<persona>``, as the design lists it), and ``salience``:
  Smith's S of each concept in each cell (columns as the pooled salience table's);
- ``R_q``: the cross-member agreement (mean pairwise RBO of the members' rankings) of every
  unconditioned (template, temperature) cell, keyed ``"<template>@<temperature>"``;
- ``template``: for each pair of templates, the within-member RBO between a member's two
  rankings at the same temperature (mean over members and temperatures) and the change of
  ``R_q`` from the first template to the second (mean over temperatures);
- ``temperature``: the same for each pair of temperatures (same template, mean over templates).

Contrasts need two cells that differ in one factor only; a question without them has ``None``.
Across questions (:func:`condition_summary`) the contrasts are averaged, and
:func:`novelty_by_width` sets the depth-pressure template's novelty against the prompt width
(the seed: novelty "was highest in wider prompts").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
from scipy import stats as sps

from lmaudit.stats.rbo import rbo_ext
from lmaudit.stats.salience import Salience, smiths_s
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord, finite
from lmaudit.studies.choir.results import (
    ConditionSummary,
    ContrastSummary,
    NoveltyBin,
    NoveltyByWidth,
    QuestionResult,
)
from lmaudit.studies.choir.results.across import Spearman
from lmaudit.studies.choir.results.question import Cell as CellRecord
from lmaudit.studies.choir.results.question import ConditionBlock, Contrast
from lmaudit.studies.choir.salience_table import COLUMNS, salience_rows_of

__all__ = ["condition_block", "condition_summary", "novelty_by_width"]

Cell = tuple[str, str, float]  # member, condition (template or persona), temperature
RankOf = Callable[[Salience], list[Any]]
MeanRbo = Callable[[Sequence[Sequence[Any]]], float | None]


def _label(condition: str, temperature: float) -> str:
    return f"{condition}@{temperature:g}"


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and np.isfinite(x)]
    return float(np.mean(vals)) if vals else None


def _contrast(
    ranked: Mapping[Cell, list[Any]],
    r_q: Mapping[tuple[str, float], float | None],
    members: Sequence[str],
    levels: Sequence[Any],
    others: Sequence[Any],
    cell: Callable[[str, Any, Any], Cell],
    rq_key: Callable[[Any, Any], tuple[str, float]],
    p: float,
) -> tuple[Contrast, ...]:
    """One row per pair of ``levels`` of the varied factor, the other factor held at each of
    ``others``: within-member RBO (mean over members and others) and the mean change of R_q."""
    rows = []
    for a, b in combinations(levels, 2):
        within: list[float] = []
        per_member: dict[str, list[float]] = {}
        deltas: list[float] = []
        for o in others:
            for m in members:
                ra, rb = ranked.get(cell(m, a, o)), ranked.get(cell(m, b, o))
                if ra and rb:
                    v = rbo_ext(ra, rb, p)
                    within.append(v)
                    per_member.setdefault(m, []).append(v)
            qa, qb = r_q.get(rq_key(a, o)), r_q.get(rq_key(b, o))
            if qa is not None and qb is not None:
                deltas.append(qb - qa)
        if not within and not deltas:
            continue
        rows.append(
            Contrast(
                from_=a,
                to=b,
                within_member_rbo=_mean(within),
                within_member_rbo_per_member={m: _mean(v) for m, v in sorted(per_member.items())},
                R_q_change=_mean(deltas),
                n_cells=len(within),
            )
        )
    return tuple(rows)


def condition_block(
    recs: Sequence[ListRecord],
    concept_of: Mapping[str, int],
    rank_of: RankOf,
    mean_rbo: MeanRbo,
    p: float,
) -> ConditionBlock:
    """The question's per-cell salience, per-cell agreement and contrasts (module notes)."""
    lists: dict[Cell, list[list[int]]] = {}
    for r in recs:
        cond = r.condition  # the design's id: the template, or "<template>|<persona>" (design.conditions)
        concepts = [concept_of[t] for t in r.items if t in concept_of]
        lists.setdefault((r.model, cond, float(r.temperature)), []).append(list(dict.fromkeys(concepts)))
    keys = sorted(lists)
    sal = {k: smiths_s(lists[k]) for k in keys}
    ranked = {k: rank_of(sal[k]) for k in keys}
    members = sorted({m for m, _, _ in keys})
    unc = {(r.condition, float(r.temperature)) for r in recs if r.persona == UNCONDITIONED}
    templates = sorted({c for c, _ in unc})
    temps = sorted({t for _, t in unc})
    r_q = {
        (c, t): mean_rbo([ranked[(m, c, t)] for m in members if (m, c, t) in ranked]) for c, t in sorted(unc)
    }
    template = _contrast(
        ranked, r_q, members, templates, temps, lambda m, c, t: (m, c, t), lambda c, t: (c, t), p
    )
    temperature = _contrast(
        ranked, r_q, members, temps, templates, lambda m, t, c: (m, c, t), lambda t, c: (c, t), p
    )
    return ConditionBlock(
        cells=tuple(
            CellRecord(model=m, condition=c, temperature=t, n_lists=sal[(m, c, t)].n_lists)
            for m, c, t in keys
        ),
        columns=(COLUMNS[0], "cell", *COLUMNS[2:]),
        salience=salience_rows_of([sal[k] for k in keys]),
        R_q={_label(c, t): finite(v) if v is not None else None for (c, t), v in r_q.items()},
        template=template or None,
        temperature=temperature or None,
    )


def _summarise(blocks: Sequence[ConditionBlock], factor: str) -> tuple[ContrastSummary, ...] | None:
    """Each contrast of ``factor`` (template | temperature) over the questions that have it."""
    pairs: dict[tuple[Any, Any], list[Contrast]] = {}
    for b in blocks:
        for row in getattr(b, factor) or ():
            pairs.setdefault((row.from_, row.to), []).append(row)
    return (
        tuple(
            ContrastSummary(
                from_=a,
                to=b,
                n_questions=len(rows),
                within_member_rbo=_mean([r.within_member_rbo for r in rows]),
                R_q_change=_mean([r.R_q_change for r in rows]),
                R_q_up=sum(1 for r in rows if r.R_q_change is not None and r.R_q_change > 0),
            )
            for (a, b), rows in sorted(pairs.items())
        )
        or None
    )


def condition_summary(per_q: Mapping[str, QuestionResult]) -> ConditionSummary | None:
    """Across questions: mean R_q per unconditioned cell, and each contrast's mean
    within-member RBO and R_q change with the number of questions behind it."""
    blocks = [v.conditions for v in per_q.values()]
    if not blocks:
        return None
    cells = sorted({k for b in blocks for k in b.R_q})
    return ConditionSummary(
        R_q={k: _mean([b.R_q.get(k) for b in blocks]) for k in cells},
        template=_summarise(blocks, "template"),
        temperature=_summarise(blocks, "temperature"),
    )


def novelty_by_width(per_q: Mapping[str, QuestionResult], edges: Sequence[float]) -> NoveltyByWidth | None:
    """The depth-pressure template's novel share against the prompt width ``W_q``: Spearman's
    rho over the questions that have both, and the mean share and count above one half per
    width bin (lower edges ``edges``)."""
    pts = [
        (float(v.width), float(v.template_novelty.share))
        for v in per_q.values()
        if v.template_novelty and v.width is not None
    ]
    if not pts:
        return None
    w = np.array([x for x, _ in pts])
    n = np.array([y for _, y in pts])
    rho = None
    if len(pts) >= 3 and np.ptp(w) > 0 and np.ptp(n) > 0:
        res = sps.spearmanr(w, n)
        rho = Spearman(rho=float(res.statistic), p=float(res.pvalue), n=len(pts))
    lo = sorted(edges)
    bins = []
    for i, a in enumerate(lo):
        b = lo[i + 1] if i + 1 < len(lo) else np.inf
        sel = n[(w >= a) & (w < b)]
        bins.append(
            NoveltyBin(
                lo=float(a),
                hi=None if b == np.inf else float(b),
                n=int(sel.size),
                mean_share=float(sel.mean()) if sel.size else None,
                over_half=int((sel > 0.5).sum()),
            )
        )
    return NoveltyByWidth(spearman=rho, bins=tuple(bins))
