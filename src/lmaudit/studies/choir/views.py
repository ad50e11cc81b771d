"""The views of the choir results the pipeline records: metrics, tags, summary, figure data.
Each takes the typed :class:`~lmaudit.studies.choir.results.ChoirResults` (the study's layout
calls them: :class:`lmaudit.studies.layout.StudyViews`); the headline is the results' method."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lmaudit.interop.audit import log_audit_line, log_audit_metrics, log_audit_tags
from lmaudit.text import metric_safe

if TYPE_CHECKING:
    from lmaudit.studies.choir.results import ChoirResults, Contrast, ContrastSummary

__all__ = ["metrics", "plot_data", "ranking_rows", "summary", "tags"]


def metrics(results: ChoirResults) -> dict[str, float]:
    out = results.across_questions.numbers()
    out["n_models"] = float(len(results.design.models))
    out["n_refused_lists"] = float(results.design.refused_lists.n)
    for what, r in results.recoverability.items():
        out[f"recover.{what}.accuracy"] = float(r.accuracy)
        for m, acc in (r.per_model or {}).items():  # the seed's per-model recoverability
            out[f"recover.{what}.per_model.{metric_safe(m)}"] = float(acc)
    leak = results.leakage
    if leak is not None:
        for k, rho in (
            ("question_spearman", leak.question_spearman),
            ("model_spearman", leak.model_spearman),
        ):
            if rho is not None and rho.rho is not None:
                out[f"leakage.{k}"] = float(rho.rho)
    if results.ranking is not None:
        rank = results.ranking.summary
        for k, n in (
            ("n_ballots", rank.n_ballots),
            ("n_valid", rank.n_valid),
            ("n_invalid", rank.n_invalid),
            ("n_completed", rank.n_completed),
        ):
            out[f"ranking.{k}"] = float(n)
        for k, c in (
            ("conditioned_cohort", rank.conditioned_cohort),
            ("unconditioned_cohort", rank.unconditioned_cohort),
            ("agree_top", rank.agree_top),
            ("agree_family", rank.agree_family),
        ):
            if c.share is not None:
                out[f"ranking.{k}.count"] = float(c.count)
                out[f"ranking.{k}.share"] = float(c.share)
                if c.ties is not None:  # ties count against the claims
                    out[f"ranking.{k}.ties"] = float(c.ties)
    for q, v in results.questions.items():
        for name, x in (
            ("R_q", v.R_q),
            ("width", v.width),
            ("echo_rate", v.echo_rate),
            ("echo_calibrated", v.echo.rate("calibrated") if v.echo else None),
            ("echo_lexical", v.echo.rate("lexical") if v.echo else None),
            ("stc", v.stc_ratio),
            ("stc_ranking_shuffle", v.stc_ranking_shuffle.ratio if v.stc_ranking_shuffle else None),
            ("relative_lift", v.relative_lift),
        ):
            if x is not None:
                out[f"{metric_safe(q)}.{name}"] = float(x)
    out.update(_condition_metrics(results))
    if results.log_audit is not None:
        out.update(log_audit_metrics(results.log_audit))
    sens = results.codebook_metric_sensitivity
    if sens is not None:
        for metric, means in (("cosine", sens.cosine), ("euclidean", sens.euclidean)):
            for k, x in (
                ("mean_C_q", means.mean_C_q),
                ("mean_R_q", means.mean_R_q),
                ("mean_width", means.mean_width),
            ):
                if x is not None:
                    out[f"codebook_{metric}.{k}"] = float(x)
    return out


def _pair(r: Contrast | ContrastSummary) -> str:
    return metric_safe("_".join(format(x, "g") if isinstance(x, float) else str(x) for x in (r.from_, r.to)))


def _condition_metrics(results: ChoirResults) -> dict[str, float]:
    """The template and temperature contrasts, novelty against width, the stripping re-runs and
    the calibration's agreement (absent keys where the run has none)."""
    out: dict[str, float] = {}

    def put(key: str, x: float | None) -> None:
        if x is not None:
            out[key] = float(x)

    cond = results.conditions
    if cond is not None:
        for cell, x in cond.R_q.items():
            put(f"conditions.R_q.{metric_safe(cell)}", x)
        for factor, rows in (("template", cond.template), ("temperature", cond.temperature)):
            for r in rows or ():
                put(f"conditions.{factor}.{_pair(r)}.within_member_rbo", r.within_member_rbo)
                put(f"conditions.{factor}.{_pair(r)}.R_q_change", r.R_q_change)
    nov = results.novelty_by_width
    if nov is not None and nov.spearman is not None:
        put("novelty_width.rho", nov.spearman.rho)
    for s in results.leakage.stripping if results.leakage else ():
        cut = metric_safe(format(s.threshold_similarity, "g"))
        put(f"stripping.{cut}.model_accuracy", s.model_accuracy)
        put(f"stripping.{cut}.persona_within_model_loqo_accuracy", s.persona_within_model_loqo_accuracy)
    agree = results.calibration.agreement if results.calibration else None
    if agree is not None:
        put("calibration.agreement.n_questions", agree.n_questions)
        put("calibration.agreement.mean_modal_share", agree.mean_modal_share)
        put("calibration.agreement.pairwise_agreement", agree.pairwise_agreement)
        put("calibration.agreement.uniform_baseline", agree.uniform_baseline)
    return out


def tags(results: ChoirResults) -> dict[str, str]:
    d = results.design
    # the models that answered (the ensemble's members), never the config's run model
    out = {"models": ",".join(d.models)[:500], "conditions": ",".join(d.conditions)[:500]}
    out["model"] = out["models"]
    if results.ranking is not None:
        rank = results.ranking.summary
        out["ranking"] = (
            f"conditioned cohort advanced conditioned-source pools {rank.conditioned_cohort.fraction}; "
            f"unconditioned cohort {rank.unconditioned_cohort.fraction}; "
            f"cohorts agree on the top candidate {rank.agree_top.fraction}"
        )
    if results.log_audit is not None:
        out.update(log_audit_tags(results.log_audit))
    return out


def summary(results: ChoirResults) -> str:
    s = results.across_questions
    rec = results.recoverability
    parts = [
        f"choir: {s.n_questions} questions x {len(results.design.models)} models",
        f"above chance {s.above_chance}/{s.n_questions} ({s.n_stc} with a signal-to-chance; "
        f"significant {s.above_chance_significant})",
        f"lift up {s.lift_up}/{s.n_lift}",
    ]
    for what in ("model", "persona", "persona_within_model_loqo"):
        if what in rec:
            parts.append(f"{what} recoverability {rec[what].accuracy:.3f} (chance {rec[what].chance:.3f})")
    if results.ranking is not None:
        rank = results.ranking.summary
        parts.append(
            f"ranking: conditioned-source advanced {rank.conditioned_cohort.fraction} (conditioned cohort), "
            f"{rank.unconditioned_cohort.fraction} (unconditioned), top agreed "
            f"{rank.agree_top.fraction}, {rank.n_invalid} invalid ballots"
        )
    if results.log_audit is not None:
        parts.append(log_audit_line(results.log_audit))
    return " | ".join(parts)


def ranking_rows(results: ChoirResults) -> list[dict[str, Any]]:
    """Per question: each cohort's advanced pool and source (a tie: none), what decided it, and
    whether the cohorts' tops agree."""
    rows = []
    for q, v in results.ranking.questions.items() if results.ranking else ():
        row: dict[str, Any] = {"question": q, "agree_top": v.agree_top}
        for c in ("conditioned", "unconditioned"):
            o = v.cohorts[c] if v.cohorts else None
            row[f"{c}_advanced_pool"] = o.advanced_pool if o else None
            row[f"{c}_advanced_source"] = o.advanced_source if o else None
            row[f"{c}_decided_by"] = o.decided_by if o else None  # finalists | stage1 (one-round ballots)
            row[f"{c}_tie"] = o.tie if o else None
        rows.append(row)
    return rows


def plot_data(results: ChoirResults) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: width vs relative lift per question, the width-bin table."""
    width = [
        {
            "question": q,
            "width": v.width,
            "relative_lift": v.relative_lift,
            "R_q": v.R_q,
            "same_persona_rbo": v.same_persona_rbo_mean,
            "stc": v.stc_ratio,
            "echo_rate": v.echo_rate,
        }
        for q, v in results.questions.items()
    ]
    bins = [
        {
            "lo": b.lo,
            "hi": b.hi,
            "n": b.n,
            **{
                k: (m.mean if m else None)
                for k, m in (
                    ("unconditioned_rbo", b.unconditioned_rbo),
                    ("same_persona_rbo", b.same_persona_rbo),
                    ("stc", b.stc),
                    ("relative_lift", b.relative_lift),
                )
            },
        }
        for b in results.width_bins
    ]
    out: dict[str, list[dict[str, Any]]] = {"width_lift": width, "width_bins": bins}
    if results.ranking is not None:
        out["ranking"] = ranking_rows(results)
    return out
