"""The views of a choir results body the pipeline records: headline, metrics, tags, summary, figure data."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lmaudit.interop.audit import log_audit_line, log_audit_metrics, log_audit_tags

__all__ = ["headline", "metrics", "plot_data", "ranking_rows", "summary", "tags"]


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/ ]", "_", name)


def headline(results: Mapping[str, Any]) -> float | None:
    """The share of questions with above-chance unconditioned agreement (signal-to-chance > 1),
    over every question analysed, as the seed counts (93/100) and ``summary.above_chance_share``
    does: a question without a signal-to-chance (fewer than two members with lists) counts against."""
    s = results["summary"]
    return s["above_chance"] / s["n_questions"] if s["n_questions"] else None


def metrics(results: Mapping[str, Any]) -> dict[str, float]:
    s = results["summary"]
    out: dict[str, float] = {
        k: float(v) for k, v in s.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    out["n_models"] = float(len(results["design"]["models"]))
    out["n_refused_lists"] = float((results["design"].get("refused_lists") or {}).get("n", 0))
    for what, r in results["recoverability"].items():
        out[f"recover.{what}.accuracy"] = float(r["accuracy"])
        for m, acc in (r.get("per_model") or {}).items():  # the seed's per-model recoverability
            out[f"recover.{what}.per_model.{_key(m)}"] = float(acc)
    leak = results.get("leakage") or {}
    for k in ("question_spearman", "model_spearman"):
        rho = (leak.get(k) or {}).get("rho")
        if isinstance(rho, int | float):
            out[f"leakage.{k}"] = float(rho)
    rank = (results.get("ranking") or {}).get("summary")
    if rank:
        for k in ("n_ballots", "n_valid", "n_invalid", "n_completed"):
            out[f"ranking.{k}"] = float(rank[k])
        for k in ("conditioned_cohort", "unconditioned_cohort", "agree_top", "agree_family"):
            if rank[k]["share"] is not None:
                out[f"ranking.{k}.count"] = float(rank[k]["count"])
                out[f"ranking.{k}.share"] = float(rank[k]["share"])
                if "ties" in rank[k]:  # ties count against the claims
                    out[f"ranking.{k}.ties"] = float(rank[k]["ties"])
    for q, v in results["questions"].items():
        for name, x in (
            ("R_q", v["R_q"]),
            ("width", v["width"]),
            ("echo_rate", v["echo_rate"]),
            ("echo_calibrated", ((v.get("echo") or {}).get("calibrated") or {}).get("rate")),
            ("echo_lexical", ((v.get("echo") or {}).get("lexical") or {}).get("rate")),
            ("stc", v["stc"]["ratio"] if v["stc"] else None),
            ("stc_ranking_shuffle", (v.get("stc_ranking_shuffle") or {}).get("ratio")),
            ("relative_lift", v["lift"]["relative"] if v["lift"] else None),
        ):
            if isinstance(x, int | float):
                out[f"{_key(q)}.{name}"] = float(x)
    out.update(_condition_metrics(results))
    if results.get("log_audit"):
        out.update(log_audit_metrics(results["log_audit"]))
    sens = results.get("codebook_metric_sensitivity") or {}
    for metric in ("cosine", "euclidean"):
        for k, x in (sens.get(metric) or {}).items():
            if isinstance(x, int | float):
                out[f"codebook_{metric}.{k}"] = float(x)
    return out


def _condition_metrics(results: Mapping[str, Any]) -> dict[str, float]:
    """The template and temperature contrasts, novelty against width, the stripping re-runs and
    the calibration's agreement (absent keys where the run has none)."""
    out: dict[str, float] = {}

    def put(key: str, x: Any) -> None:
        if isinstance(x, int | float) and not isinstance(x, bool):
            out[key] = float(x)

    cond = results.get("conditions") or {}
    for cell, x in (cond.get("R_q") or {}).items():
        put(f"conditions.R_q.{_key(cell)}", x)
    for factor in ("template", "temperature"):
        for r in cond.get(factor) or []:
            pair = _key(
                "_".join(format(x, "g") if isinstance(x, float) else str(x) for x in (r["from"], r["to"]))
            )
            put(f"conditions.{factor}.{pair}.within_member_rbo", r["within_member_rbo"])
            put(f"conditions.{factor}.{pair}.R_q_change", r["R_q_change"])
    put("novelty_width.rho", ((results.get("novelty_by_width") or {}).get("spearman") or {}).get("rho"))
    for r in (results.get("leakage") or {}).get("stripping") or []:
        cut = _key(format(r["threshold_similarity"], "g"))
        put(f"stripping.{cut}.model_accuracy", r["model_accuracy"])
        put(f"stripping.{cut}.persona_within_model_loqo_accuracy", r["persona_within_model_loqo_accuracy"])
    for k, x in (((results.get("calibration") or {}).get("agreement")) or {}).items():
        put(f"calibration.agreement.{k}", x)
    return out


def _fraction(c: Mapping[str, Any]) -> str:
    return f"{c['count']}/{c['n']}"


def tags(results: Mapping[str, Any]) -> dict[str, str]:
    d = results["design"]
    # the models that answered (the ensemble's members), never the config's run model
    out = {"models": ",".join(d["models"])[:500], "conditions": ",".join(d["conditions"])[:500]}
    out["model"] = out["models"]
    rank = (results.get("ranking") or {}).get("summary")
    if rank:
        out["ranking"] = (
            f"conditioned cohort advanced conditioned-source pools {_fraction(rank['conditioned_cohort'])}; "
            f"unconditioned cohort {_fraction(rank['unconditioned_cohort'])}; "
            f"cohorts agree on the top candidate {_fraction(rank['agree_top'])}"
        )
    if results.get("log_audit"):
        out.update(log_audit_tags(results["log_audit"]))
    return out


def summary(results: Mapping[str, Any]) -> str:
    s = results["summary"]
    rec = results["recoverability"]
    parts = [
        f"choir: {s['n_questions']} questions x {len(results['design']['models'])} models",
        f"above chance {s['above_chance']}/{s['n_questions']} ({s['n_stc']} with a signal-to-chance; "
        f"significant {s['above_chance_significant']})",
        f"lift up {s['lift_up']}/{s['n_lift']}",
    ]
    for what in ("model", "persona", "persona_within_model_loqo"):
        if what in rec:
            parts.append(
                f"{what} recoverability {rec[what]['accuracy']:.3f} (chance {rec[what]['chance']:.3f})"
            )
    rank = (results.get("ranking") or {}).get("summary")
    if rank:
        parts.append(
            f"ranking: conditioned-source advanced {_fraction(rank['conditioned_cohort'])} (conditioned cohort), "
            f"{_fraction(rank['unconditioned_cohort'])} (unconditioned), top agreed "
            f"{_fraction(rank['agree_top'])}, {rank['n_invalid']} invalid ballots"
        )
    if results.get("log_audit"):
        parts.append(log_audit_line(results["log_audit"]))
    return " | ".join(parts)


def ranking_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per question: each cohort's advanced pool and source (a tie: none), what decided it, and
    whether the cohorts' tops agree."""
    rows = []
    for q, v in ((results.get("ranking") or {}).get("questions") or {}).items():
        row: dict[str, Any] = {"question": q, "agree_top": v["agree_top"]}
        for c in ("conditioned", "unconditioned"):
            o = (v.get("cohorts") or {}).get(c) or {}
            row[f"{c}_advanced_pool"] = o.get("advanced_pool")
            row[f"{c}_advanced_source"] = o.get("advanced_source")
            row[f"{c}_decided_by"] = o.get("decided_by")  # finalists | stage1 (one-round ballots)
            row[f"{c}_tie"] = o.get("tie")
        rows.append(row)
    return rows


def plot_data(results: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: width vs relative lift per question, the width-bin table."""
    width = [
        {
            "question": q,
            "width": v["width"],
            "relative_lift": v["lift"]["relative"] if v["lift"] else None,
            "R_q": v["R_q"],
            "same_persona_rbo": v["same_persona_rbo_mean"],
            "stc": v["stc"]["ratio"] if v["stc"] else None,
            "echo_rate": v["echo_rate"],
        }
        for q, v in results["questions"].items()
    ]
    bins = [
        {
            "lo": b["lo"],
            "hi": b["hi"],
            "n": b["n"],
            **{
                k: (b[k]["mean"] if b[k] else None)
                for k in ("unconditioned_rbo", "same_persona_rbo", "stc", "relative_lift")
            },
        }
        for b in results["width_bins"]
    ]
    out = {"width_lift": width, "width_bins": bins}
    if results.get("ranking"):
        out["ranking"] = ranking_rows(results)
    return out
