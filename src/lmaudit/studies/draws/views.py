"""The views of a draws results body the pipeline records: headline, metrics, tags, summary,
figure data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmaudit.interop import audit as log_audit
from lmaudit.interop import scores as log_scores
from lmaudit.studies.draws.analysis import metric_key

__all__ = ["headline", "metrics", "plot_data", "summary", "tags"]


def headline(results: Mapping[str, Any]) -> float:
    """The share of families whose persistence test rejects after Holm's correction."""
    n = results["n_families"]
    return results["n_rejected"] / n if n else float("nan")


def _key(name: str) -> str:
    return metric_key(name)


def metrics(results: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {
        "n_families": results["n_families"],
        "n_rejected": results["n_rejected"],
        "n_sequences": results["data"]["analysed_sequences"],
        "n_excluded": results["data"]["excluded"]["n"],
        "n_deduplicated": results["data"]["deduplicated"]["n_dropped"],
        "n_refused": results["data"].get("refused", {}).get("sequences", 0),
    }
    fams = results["families"]
    if fams:
        out["share_rejected"] = headline(results)
    for stat, pick in (("holm_p", min), ("rho_upper", max)):
        values = [float(f[stat]) for f in fams.values() if isinstance(f.get(stat), int | float)]
        if values:
            out[f"{pick.__name__}_{stat}"] = pick(values)
    # one family (a sampled run): its numbers under the same keys whatever the model, which a
    # tag names; several (an import): each family's under its name, beside the keys above
    for name, f in fams.items():
        k = "" if len(fams) == 1 else f"{_key(name)}."
        for m in ("T", "p", "holm_p", "rho_hat", "rho_upper", "n_informative", "n_uninformative"):
            if isinstance(f.get(m), int | float):
                out[f"{k}{m}"] = float(f[m])
        out[f"{k}drift_p"] = float(f["drift"]["p"])
        ci = f.get("rho_hat_ci") or {}
        if ci.get("low") is not None:  # rho_hat's bootstrap interval over prompts (.bootstrap)
            out[f"{k}rho_hat_ci_low"], out[f"{k}rho_hat_ci_high"] = float(ci["low"]), float(ci["high"])
        for r, v in f["power"].items():
            out[f"{k}power_{r}"] = float(v)
    if results.get("log_audit"):
        out.update(log_audit.log_audit_metrics(results["log_audit"]))
    if results.get("error_bars"):
        out.update(log_scores.error_bars_metrics(results["error_bars"], _key))
    return out


def _verdict(f: Mapping[str, Any]) -> str:
    return ("persistence" if f["reject"] else "not rejected") + f" (rho_upper {f['rho_upper_label']})"


def tags(results: Mapping[str, Any]) -> dict[str, str]:
    fams = results["families"]
    if len(fams) == 1:
        ((name, f),) = fams.items()
        t = {"family": name, "verdict": _verdict(f)}
    else:
        t = {f"family.{_key(n)}": _verdict(f) for n, f in fams.items()}
        # a family whose key is not its name (characters MLflow refuses, a path): its name
        t.update({f"family_name.{_key(n)}": n for n in fams if _key(n) != n})
    t["model"] = ",".join(fams)[:500]  # the families measured (a sampled run's: its model)
    t["mode"] = str(results.get("mode"))
    t["flagged_sources"] = (
        ",".join(f"{n}:{s}" for n, f in results["families"].items() for s in f["flagged_sources"]) or "none"
    )
    if results.get("log_audit"):
        t.update(log_audit.log_audit_tags(results["log_audit"]))
    return t


def _ci_text(f: Mapping[str, Any]) -> str:
    ci = f.get("rho_hat_ci") or {}
    return "" if ci.get("low") is None else f" [{ci['low']:.3f}, {ci['high']:.3f}]"


def summary(results: Mapping[str, Any]) -> str:
    fams = "; ".join(
        f"{n}: T={f['T']:.2f} p={f['p']:.4g} Holm p={f['holm_p']:.4g} rho_hat="
        f"{'-' if f['rho_hat'] is None else format(f['rho_hat'], '.3f')}{_ci_text(f)} rho_upper {f['rho_upper_label']}"
        f" drift p={f['drift']['p']:.4g}"
        for n, f in results["families"].items()
    )
    d = results["data"]
    audit = results.get("log_audit")
    bars = "; ".join(
        f"{n} {t}: {e['accuracy']:.3f} ± {e['se_clustered']:.3f} clustered"
        + (f" (log {e['log_stderr']:.3f})" if e["log_stderr"] is not None else "")
        for n, tasks in (results.get("error_bars") or {}).items()
        for t, e in tasks.items()
    )
    return (
        f"draws: {results['n_families']} families, {d['analysed_sequences']} sequences "
        f"({d['excluded']['n']} excluded, {d['deduplicated']['n_dropped']} prefix duplicates dropped) | "
        f"{results['n_rejected']} rejected (Holm) | {fams}"
        + (f" | {log_audit.log_audit_line(audit)}" if audit else "")
        + (f" | error bars: {bars}" if bars else "")
    )


def plot_data(results: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: the rho_upper curves, the permutation nulls, the source table."""
    curve, null = [], []
    for n, f in results["families"].items():
        curve += [
            {"family": n, "rho": r, "share_le": s}
            for r, s in zip(f["rho_curve"]["rho"], f["rho_curve"]["share_le"], strict=True)
        ]
        null += [
            {"family": n, "T": t, "count": c} for t, c in zip(f["null"]["T"], f["null"]["count"], strict=True)
        ]
    # family and source first, the numbers after (a row read back from results.json has its
    # keys sorted)
    sources = [{"family": r.get("family"), "source": r.get("source"), **r} for r in results["sources"]]
    return {"rho_curve": curve, "null": null, "sources": sources}
