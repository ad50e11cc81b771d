"""The choir report: one self-contained ``report.html`` (inline CSS and SVG, no scripts).

The page (:mod:`lmaudit.reporting.page`) leads with the verdict (:mod:`.verdict`); the study's
sections (``template.html.j2``) show the figures (:mod:`.figures`,
:mod:`.ranking`) each with a caption saying how to read it, and the tables behind them;
every list follows with its exact prompt and answer (:mod:`.samples`); provenance comes last.
:func:`render_report` takes the typed results, the plan (or ``None``), the audit record and the
measurement rows; the page depends on nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from lmaudit.reporting import fmt, get, interval_text
from lmaudit.reporting.log_audit import log_alerts
from lmaudit.reporting.page import Samples, page_of, provenance, render, run_record_rows
from lmaudit.studies.choir.report.conditions import conditions_view
from lmaudit.studies.choir.report.echo import echo_view
from lmaudit.studies.choir.report.figures import (
    RECOVER_LABELS,
    bin_label,
    bins_svg,
    cue_pairs_svg,
    recover_svg,
    scatter_svg,
    width_lift_svg,
)
from lmaudit.studies.choir.report.ranking import ranking_view
from lmaudit.studies.choir.report.samples import NOTE, question_texts, samples
from lmaudit.studies.choir.report.verdict import alerts, verdict
from lmaudit.studies.choir.results import BinMean, ChoirResults, CueStripping, QuestionResult, Recovery
from lmaudit.studies.choir.salience_table import salience_view
from lmaudit.studies.layout import ReportInputs

__all__ = ["render_report"]

TEMPLATE = "template.html.j2"
QUESTION = (
    "Do the members of a model ensemble name the same concepts when asked for free lists, beyond what "
    "chance gives, and how much do the question's width and a persona prompt change that?"
)
TERMS = ["RBO", "STC", "width", "persona lift", "echo", "recoverability", "shuffle-null band"]


def _svg(svg: str | None) -> Markup | None:
    return Markup(svg) if svg else None


def _interval(x: BinMean | None) -> str:
    return f"{fmt(x.mean)} [{fmt(x.ci.lo)}, {fmt(x.ci.hi)}]" if x else "—"


def _questions(qs: Mapping[str, QuestionResult], wording: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "id": q,
            "text": wording.get(q, "") + (f" (stripped of {v.stripped_of}'s cues)" if v.stripped_of else ""),
            "cells": [
                str(v.n_lists),
                str(v.C_q),
                fmt(v.R_q),
                fmt(v.width),
                fmt(v.stc.ratio if v.stc else None),
                fmt(v.stc.p if v.stc else None),
                fmt(v.stc_ranking_shuffle.ratio if v.stc_ranking_shuffle else None),
                fmt(v.stc_ranking_shuffle.p if v.stc_ranking_shuffle else None),
                fmt(v.echo_rate),
                fmt(v.same_persona_rbo_mean),
                fmt(v.relative_lift),
                fmt(v.codebook_test.p if v.codebook_test else None),
            ],
        }
        for q, v in qs.items()
    ]


#: the recoverability estimators shown first (the primary ones); the sensitivities follow by name
_PRIMARY = ("model", "persona", "persona_within_model_loqo")


def _in_order(rec: Mapping[str, Recovery]) -> list[tuple[str, Recovery]]:
    """Recoverability entries in a fixed order, whether the results were just computed or read
    back from results.json (whose keys are sorted)."""
    return [(k, rec[k]) for k in (*[k for k in _PRIMARY if k in rec], *sorted(set(rec) - set(_PRIMARY)))]


def _per_model(rec: Mapping[str, Recovery]) -> list[list[str]]:
    """Per member: the global classifier's model and persona accuracy, and the within-member one."""

    def of(k: str, per_stratum: bool = False) -> Mapping[str, float]:
        r = rec.get(k)
        return {} if r is None else r.per_stratum if per_stratum else (r.per_model or {})

    get = [of("model"), of("persona"), of("persona_within_model_loqo", per_stratum=True)]
    members = sorted(set().union(*get))
    return [[m, *(fmt(g.get(m)) for g in get)] for m in members]


def _cues(cues: CueStripping | None) -> dict[str, Any] | None:
    if cues is None or not cues.pairs:
        return None
    rows = [
        [f"{p.original} → {p.stripped}", ", ".join(p.anchors)]
        + [
            f"{fmt(getattr(p.before, k))} → {fmt(getattr(p.after, k))}"
            for k in ("item_echo", "cluster_echo", "rbo", "stc")
        ]
        for p in cues.pairs
    ]
    return {"svg": _svg(cue_pairs_svg(cues.pairs)), "rows": rows, "counts": cues.counts}


def _figures(results: ChoirResults) -> dict[str, Markup | None]:
    qs = results.questions
    return {
        "width_lift": _svg(width_lift_svg(qs)),
        "bins": _svg(bins_svg(results.width_bins)),
        "recover": _svg(recover_svg(results.recoverability)),
        "echo": _svg(scatter_svg(qs, "echo_rate", "stc", "echo rate", "signal-to-chance", "choir-echo")),
        "rbo": _svg(
            scatter_svg(
                qs, "R_q", "same_persona_rbo_mean", "unconditioned RBO", "same-persona RBO", "choir-rbo"
            )
        ),
    }


def _provenance(
    results: ChoirResults, plan: Mapping[str, Any] | None, audit: Mapping[str, Any]
) -> list[tuple[str, str]]:
    d = results.design
    members = get(audit, "measure", "ensemble") or []
    evaluators = get(audit, "measure", "evaluators") or []
    inputs = get(plan, "inputs") or {}
    return provenance(
        [
            ("Study", results.study),
            ("Mode", get(plan, "mode")),
            ("Members", d.models),
            ("Member identity digests", {m.get("name"): m.get("identity_digest") for m in members}),
            ("Embedder", results.embedder),
            ("Extraction", d.extraction.to_json()),
            ("Ranking", get(plan, "ranking")),
            ("Evaluator identity digests", {m.get("name"): m.get("identity_digest") for m in evaluators}),
            (
                "Inputs (SHA-256)",
                {k: v.get("sha256") for k, v in sorted(inputs.items()) if isinstance(v, Mapping)},
            ),
            ("Plan digest", get(plan, "plan_digest") or audit.get("plan_digest")),
            ("Measurements SHA-256", results.source.measurements_sha256 if results.source else None),
            ("Registration", results.prereg.name if results.prereg else None),
            *run_record_rows(audit),
        ]
    )


def render_report(inputs: ReportInputs[ChoirResults]) -> str:
    """The report page as a string (the pipeline writes it, atomically)."""
    results, plan, audit, rows = inputs.results, inputs.plan, inputs.audit, inputs.rows
    alpha = get(plan, "config", "study", "alpha")
    d = results.design
    ranking = ranking_view(results.ranking)
    listed, total = samples(rows, plan)
    log_audit = results.log_audit
    page = page_of(
        results,
        plan,
        study="choir",
        title=f"Free lists across models: {results.across_questions.n_questions} questions, {len(d.models)} members",
        question=QUESTION,
        verdict=verdict(results, alpha),
        alerts=alerts(results) + log_alerts(log_audit, "the lists"),
        terms=TERMS + (["source-blind ranking"] if ranking else []),
        samples=Samples(listed, total, NOTE),
        provenance=_provenance(results, plan, audit),
    )
    return render(
        __package__,
        TEMPLATE,
        page,
        s=results.across_questions,
        design=d,
        figs=_figures(results),
        ev=echo_view(results),
        cv=conditions_view(results),
        log_audit=log_audit,
        log_unit="free lists",
        bins=[
            [bin_label(b), str(b.n)]
            + [_interval(m) for m in (b.unconditioned_rbo, b.same_persona_rbo, b.stc, b.relative_lift)]
            for b in results.width_bins
            if b.n
        ],
        empty_bins=[bin_label(b) for b in results.width_bins if not b.n],
        recover=[
            [
                RECOVER_LABELS.get(k, k),
                fmt(r.accuracy),
                interval_text(r.interval),
                *(fmt(x) for x in (r.chance, r.null_mean, r.p)),
                str(r.n_cells),
            ]
            for k, r in _in_order(results.recoverability)
        ],
        recover_per_model=_per_model(results.recoverability),
        cues=_cues(results.cue_stripping),
        ranking=ranking,
        questions=_questions(results.questions, question_texts(plan)),
        salience=salience_view(results.questions),
    )
