"""The views of the judge's typed results the pipeline records: metrics, tags, summary and
figure data, each of :class:`~lmaudit.studies.judge.results.JudgeResults` (the study's layout
calls them: :class:`lmaudit.studies.layout.StudyViews`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from lmaudit.studies.judge.report import order_swap as order_swap_report
from lmaudit.text import metric_safe, metrics_under

if TYPE_CHECKING:
    from lmaudit.studies.judge.results import JudgeResults

__all__ = ["metrics", "plot_data", "summary", "tags"]


def metrics(results: JudgeResults) -> dict[str, float]:
    v = results.validity
    out: dict[str, float] = {
        "n_prompts": results.n_prompts,
        "k": results.k,
        "n_judgments": v.judgments,
        "n_invalid": v.invalid,
        "n_retries": v.retries,
    }
    h = results.disagreement_rate()
    if not math.isnan(h):
        out["disagreement_rate"] = h
    for cid, s in results.conditions.items():
        for lab in ("A", "B", "TIE", "INVALID"):
            out[f"{metric_safe(cid)}.n_{lab}"] = getattr(s.counts, lab)
        for stat in ("mean", "median"):
            x = getattr(s.confidence, stat)
            if x is not None:
                out[f"{metric_safe(cid)}.confidence_{stat}"] = x
    for d in results.disagreement:
        k = "repeat" if d.is_repeat else metric_safe(d.condition)
        out |= metrics_under(
            f"disagreement.{k}",
            changed=d.changed,
            n=d.n,
            rate=d.rate,
            ci_high=d.ci.high,
            sign_p=d.sign_test.p,
        )
    cls = results.classification
    if cls.evaluable and cls.counts is not None:
        for c, n in cls.counts.items():
            out[f"class.{c}"] = n
    pat = results.patterns
    if pat.evaluable:
        out["pattern.n"] = pat.n
        out["pattern.n_both_decisive"] = pat.n_both_decisive
        out["pattern.attraction"] = pat.attraction.count
        out["pattern.aversion"] = pat.aversion.count
    mw = results.model_wins
    if mw.evaluable:
        for cid, w in mw.by_condition.items():
            for m, n in w.wins.items():
                out[f"wins.{metric_safe(cid)}.{metric_safe(m)}"] = n
    if results.order_swap is not None:
        out.update(order_swap_report.metrics(results.order_swap))
    if results.length is not None:
        out.update(order_swap_report.length_metrics(results.length))
    return out


def tags(results: JudgeResults) -> dict[str, str]:
    t = {
        "mode": results.mode,
        "isolation": results.design.isolation_text,
        "deviations": ",".join(x.id for x in results.deviations) or "none",
        "conditions": ",".join(results.conditions_analysed),
    }
    mw = results.model_wins
    if mw.evaluable:
        t["ranking_changes"] = str(mw.ranking_changes)
    if results.design.format:
        t["import_format"] = results.design.format
    return t


def summary(results: JudgeResults) -> str:
    parts = [f"{d.comparison}: {d.changed}/{d.n}" for d in results.disagreement]
    cs = results.conditions
    counts = "; ".join(
        f"{cid} A {cs[cid].counts.A} B {cs[cid].counts.B} TIE {cs[cid].counts.TIE} "
        f"invalid {cs[cid].counts.INVALID}"
        for cid in results.conditions_analysed
    )
    cls = results.classification
    classes = (
        ", ".join(f"{c} {n}" for c, n in (cls.counts or {}).items() if n)
        if cls.evaluable
        else "classification needs P0, PA, PB and PAB"
    )
    pat = results.patterns
    if pat.evaluable:
        classes += (
            f" | patterns: attraction {pat.attraction.count}, aversion {pat.aversion.count}"
            f" of {pat.n_both_decisive} both decisive"
        )
    devs = ",".join(x.id for x in results.deviations) or "none"
    swap = f" | {order_swap_report.summary(results.order_swap)}" if results.order_swap is not None else ""
    if results.length is not None:
        swap += f" | {order_swap_report.length_summary(results.length)}"
    return (
        f"judge ({results.mode}): {results.n_prompts} prompts x k={results.k} | "
        f"{'; '.join(parts) or 'no comparison (single condition)'} | {counts} | {classes} | "
        f"invalid {results.validity.invalid}/{results.validity.judgments} | deviations: {devs}"
        f"{swap}"
    )


def plot_data(results: JudgeResults) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: the condition grid, the disagreement table, confidences."""
    grid = [
        {"item": it.item, "condition": cid, "replicate": r, "winner": lab or "INVALID"}
        for it in results.items
        for cid, labels in it.labels.items()
        for r, lab in enumerate(labels)
    ]
    dis = [
        {
            "comparison": d.comparison,
            "changed": d.changed,
            "n": d.n,
            "rate": d.rate if d.rate is not None else "",
            "ci_low": d.ci.low,
            "ci_high": d.ci.high,
            "sign_p": d.sign_test.p,
        }
        for d in results.disagreement
    ]
    conf = [
        {"condition": cid, "confidence": x}
        for cid, s in results.conditions.items()
        for x in s.confidence.values
    ]
    out: dict[str, list[dict[str, Any]]] = {"grid": grid, "disagreement": dis, "confidence": conf}
    if results.order_swap is not None:
        out["order_swap"] = order_swap_report.plot_rows(results.order_swap)
    return out
