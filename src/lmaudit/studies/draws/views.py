"""The views of the draws study's typed results the pipeline records: metrics, tags, summary
and figure data (:func:`plot_data`), each of :class:`.results.DrawsResults` (the study's layout
calls them: :class:`lmaudit.studies.layout.StudyViews`).

The imported logs' ``log_audit`` and ``error_bars`` sections are shared with the other study
that reads logs (choir): their metrics, tags and summary line come from
:mod:`lmaudit.interop.audit` and :mod:`lmaudit.interop.scores`, which take the sections' JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lmaudit.interop import audit as log_audit
from lmaudit.interop import scores as log_scores
from lmaudit.studies.draws.keys import metric_key

if TYPE_CHECKING:
    from lmaudit.studies.draws.results import DrawsResults, Family

__all__ = ["metrics", "plot_data", "summary", "tags"]


def metrics(results: DrawsResults) -> dict[str, float]:
    data = results.data
    out: dict[str, float] = {
        "n_families": results.n_families,
        "n_rejected": results.n_rejected,
        "n_sequences": data.analysed_sequences,
        "n_excluded": data.excluded.n,
        "n_deduplicated": data.deduplicated.n_dropped,
        "n_refused": data.refused.sequences,
    }
    fams = results.families
    if fams:
        out["share_rejected"] = results.share_rejected
        out["min_holm_p"] = min(f.holm_p for f in fams.values())
    uppers = [f.rho_upper for f in fams.values() if f.rho_upper is not None]
    if uppers:
        out["max_rho_upper"] = max(uppers)
    # one family (a sampled run): its numbers under the same keys whatever the model, which a
    # tag names; several (an import): each family's under its name, beside the keys above
    for name, f in fams.items():
        k = "" if len(fams) == 1 else f"{metric_key(name)}."
        for m, v in (
            ("T", f.T),
            ("p", f.p),
            ("holm_p", f.holm_p),
            ("rho_hat", f.rho_hat),
            ("rho_upper", f.rho_upper),
            ("n_informative", f.n_informative),
            ("n_uninformative", f.n_uninformative),
        ):
            if v is not None:
                out[f"{k}{m}"] = float(v)
        out[f"{k}drift_p"] = float(f.drift.p)
        ci = f.rho_hat_ci.interval
        if ci is not None:  # rho_hat's bootstrap interval over prompts (.bootstrap)
            out[f"{k}rho_hat_ci_low"], out[f"{k}rho_hat_ci_high"] = ci.lo, ci.hi
        for r, v in f.power.items():
            out[f"{k}power_{r}"] = float(v)
    if results.log_audit is not None:
        out.update(log_audit.log_audit_metrics(results.log_audit))
    if results.error_bars:
        out.update(log_scores.error_bars_metrics(results.error_bars, metric_key))
    return out


def tags(results: DrawsResults) -> dict[str, str]:
    fams = results.families
    if len(fams) == 1:
        ((name, f),) = fams.items()
        t = {"family": name, "verdict": f.verdict}
    else:
        t = {f"family.{metric_key(n)}": f.verdict for n, f in fams.items()}
        # a family whose key is not its name (characters MLflow refuses, a path): its name
        t.update({f"family_name.{metric_key(n)}": n for n in fams if metric_key(n) != n})
    t["model"] = ",".join(fams)[:500]  # the families measured (a sampled run's: its model)
    t["mode"] = results.mode
    t["flagged_sources"] = ",".join(f"{n}:{s}" for n, s in results.flagged) or "none"
    if results.log_audit is not None:
        t.update(log_audit.log_audit_tags(results.log_audit))
    return t


def _ci_text(f: Family) -> str:
    ci = f.rho_hat_ci.interval
    return "" if ci is None else f" [{ci.lo:.3f}, {ci.hi:.3f}]"


def summary(results: DrawsResults) -> str:
    fams = "; ".join(
        f"{n}: T={f.T:.2f} p={f.p:.4g} Holm p={f.holm_p:.4g} rho_hat="
        f"{'-' if f.rho_hat is None else format(f.rho_hat, '.3f')}{_ci_text(f)} rho_upper {f.rho_upper_label}"
        f" drift p={f.drift.p:.4g}"
        for n, f in results.families.items()
    )
    d = results.data
    bars = "; ".join(
        f"{n} {t}: {e.accuracy:.3f} ± {e.se_clustered:.3f} clustered"
        + (f" (log {e.log_stderr:.3f})" if e.log_stderr is not None else "")
        for n, t, e in results.error_bar_entries()
    )
    audit = results.log_audit
    return (
        f"draws: {results.n_families} families, {d.analysed_sequences} sequences "
        f"({d.excluded.n} excluded, {d.deduplicated.n_dropped} prefix duplicates dropped) | "
        f"{results.n_rejected} rejected (Holm) | {fams}"
        + (f" | {log_audit.log_audit_line(audit)}" if audit is not None else "")
        + (f" | error bars: {bars}" if bars else "")
    )


def plot_data(results: DrawsResults) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: the rho_upper curves, the permutation nulls, the source table."""
    curve, null = [], []
    for n, f in results.families.items():
        curve += [
            {"family": n, "rho": r, "share_le": s}
            for r, s in zip(f.rho_curve.rho, f.rho_curve.share_le, strict=True)
        ]
        null += [{"family": n, "T": t, "count": c} for t, c in zip(f.null.T, f.null.count, strict=True)]
    # family and source first, the numbers after in the order of their names (as results.json
    # holds them)
    sources = []
    for row in results.sources:
        doc = row.to_json()
        sources.append({"family": row.family, "source": row.source, **dict(sorted(doc.items()))})
    return {"rho_curve": curve, "null": null, "sources": sources}
