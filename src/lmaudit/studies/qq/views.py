"""The views of a QQ results body the pipeline records: headline, metrics, tags, summary, figure data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "headline",
    "metrics",
    "mixture_cdf",
    "mixture_metrics",
    "plot_data",
    "summary",
    "summary_metrics",
    "tags",
]


def headline(results: Mapping[str, Any]) -> float:
    """The share of items whose QQ verdict is VIOLATED (returned to Hydra sweepers)."""
    n = results["n_items"]
    return results["counts"]["verdict"]["VIOLATED"] / n if n else float("nan")


def metrics(results: Mapping[str, Any]) -> dict[str, float]:
    c = results["counts"]
    out: dict[str, float] = {
        "n_items": results["n_items"],
        "n_saturated": c["saturated"],
        "max_other_mass": results["mass"]["max_other"],
        "max_envelope_width": results["mass"]["max_envelope_width"],
        "share_violated": headline(results),
    }
    out.update({f"n_{k.lower()}": v for k, v in c["verdict"].items()})
    out.update({f"n_gamma_{k.lower()}": v for k, v in c["gamma_class"].items()})
    for row in results["saturation"]["sensitivity"]:
        out[f"n_saturated_at_{row['threshold']}"] = row["n_saturated"]
    if "summary" in results:  # across items, with intervals (studies/qq/summary.py)
        out.update(summary_metrics(results["summary"]))
    if "excluded" in c:  # items with an undefined P(y | y or n) somewhere (analysis.ExcludedItem)
        out["n_excluded"] = c["excluded"]
    for it in results["items"]:
        out[f"q.{it['item']}"] = it["q"]
        out[f"oss.{it['item']}"] = it["oss"]
    if "mixture" in results:
        out.update(mixture_metrics(results["mixture"]))
    return out


def summary_metrics(summ: dict[str, Any]) -> dict[str, float]:
    """The across-item summaries as metrics (``summary.`` prefix; an interval that is not
    defined, below two items, is left out)."""
    out: dict[str, float] = {}
    parts = [("mean_abs_q", summ["mean_abs_q"], "mean"), ("share_violated", summ["share_violated"], "share")]
    if summ.get("label_effect") is not None:
        parts.append(("label_effect_abs_delta_oss", summ["label_effect"], "mean"))
        out["summary.label_effect_large"] = float(summ["label_effect"]["large"])
    for name, s, key in parts:
        if s[key] is not None:
            out[f"summary.{name}"] = float(s[key])
        if s["ci"] is not None:
            out[f"summary.{name}_ci_low"], out[f"summary.{name}_ci_high"] = (float(v) for v in s["ci"])
    return out


def mixture_metrics(mix: dict[str, Any]) -> dict[str, float]:
    """A mixture run's component-level diagnostics as metrics (``mixture.`` prefix)."""
    c = mix["counts"]
    out: dict[str, float] = {
        "mixture.n_components": mix["n_components"],
        "mixture.n_averaged_away": c["averaged_away"],
        "mixture.n_dispersion_restored": c["dispersion_restored"],
        **{f"mixture.n_saturated_{k}": v for k, v in c["saturated"].items()},
        **{f"mixture.n_component_{k.lower()}": v for k, v in c["component_verdicts"].items()},
        "mixture.near_deterministic_aggregate": mix["near_deterministic"]["aggregate"],
        "mixture.near_deterministic_plain": mix["near_deterministic"]["plain"],
    }
    for name, share in mix["near_deterministic"]["families"].items():
        out[f"mixture.near_deterministic_family.{name}"] = share
    for it in mix["items"]:
        out[f"mixture.q_range.{it['item']}"] = it["q_spread"]["range"]
        out[f"mixture.n_violating_components.{it['item']}"] = len(it["violating_components"])
        out[f"mixture.averaged_away.{it['item']}"] = float(it["averaged_away"])
    for comp in mix["components"]:
        for k, v in comp["counts"]["verdict"].items():
            out[f"mixture.component.{comp['id']}.n_{k.lower()}"] = v
        out[f"mixture.component.{comp['id']}.n_saturated"] = comp["counts"]["saturated"]
    return out


def mixture_cdf(mix: dict[str, Any]) -> list[dict[str, Any]]:
    """Fig. 1 of a mixture run: one CDF per curve (aggregate, plain estimand, each family)."""
    d = mix["distances"]
    curves = [("aggregate", d["aggregate"]), ("plain", d["plain"]), *d["families"].items()]
    return [
        {"curve": name, "d": x, "cdf": (i + 1) / len(values)}
        for name, values in curves
        for i, x in enumerate(values)
    ]


def plot_data(results: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: the distance-from-determinism CDF and the label-effect scatter."""
    positions = []
    for it in results["items"]:
        for m in it["mappings"]:
            for cell in m["cells"]:
                for p in cell["positions"]:
                    positions.append(
                        {
                            "item": it["item"],
                            "stratum": it["stratum"],
                            "mapping": m["mapping"],
                            "order": cell["order"],
                            "position": p["position"],
                            "first_answer": p["first_answer"] or "",
                            "d": p["d"],
                        }
                    )
    positions.sort(key=lambda r: r["d"])
    n = len(positions)
    cdf = [{**r, "cdf": (i + 1) / n} for i, r in enumerate(positions)]
    scatter = []
    for it in results["items"]:
        by = {m["mapping"]: m for m in it["mappings"]}
        if "map1" in by and "map2" in by:
            scatter.append(
                {
                    "item": it["item"],
                    "q_map1": by["map1"]["q"],
                    "q_map2": by["map2"]["q"],
                    "oss_map1": by["map1"]["oss"],
                    "oss_map2": by["map2"]["oss"],
                }
            )
    out = {"distance_cdf": cdf, "label_effect": scatter}
    if "mixture" in results:
        out["mixture_distance_cdf"] = mixture_cdf(results["mixture"])
    return out


def tags(results: Mapping[str, Any]) -> dict[str, str]:
    t = {f"gate.{g}": v["status"] for g, v in results["gates"].items()}
    mem = results.get("memorization")
    if mem is not None:
        t["memorization_alert"] = str(mem.get("alert"))
    if "mixture" in results:
        t["mixture.averaged_away"] = str(results["mixture"]["counts"]["averaged_away"] > 0)
        t["mixture.order_matched"] = str(results["mixture"]["order_matched"])
    return t


def summary(results: Mapping[str, Any]) -> str:
    c = results["counts"]
    v = c["verdict"]
    g = c["gamma_class"]
    gates = ", ".join(f"{k} {x['status']}" for k, x in results["gates"].items())
    mix = results.get("mixture")
    extra = ""
    summ = results.get("summary") or {}
    sv, aq = summ.get("share_violated") or {}, summ.get("mean_abs_q") or {}
    if sv.get("ci") is not None:
        extra += (
            f" | share VIOLATED {sv['share']:.3f} [{sv['ci'][0]:.3f}, {sv['ci'][1]:.3f}] (Clopper-Pearson)"
        )
    if aq.get("ci") is not None:
        extra += f", mean |q| {aq['mean']:.3f} [{aq['ci'][0]:.3f}, {aq['ci'][1]:.3f}] (t)"
    if (summ.get("label_effect") or {}).get("large"):
        extra += f", label-mapping effect large (mean |dOSS| {summ['label_effect']['mean']:.3f})"
    if c.get("excluded"):
        extra += f" | excluded {c['excluded']} (no probability on either label at a position)"
    if mix is not None:
        mc = mix["counts"]
        extra += (
            f" | mixture of {mix['n_components']} components: averaged away {mc['averaged_away']}, "
            f"saturated {mc['saturated']['aggregate']} (plain {mc['saturated']['plain']})"
        )
    return (
        f"QQ: {results['n_items']} items | SATISFIED {v['SATISFIED']}, VIOLATED {v['VIOLATED']}, "
        f"INDETERMINATE {v['INDETERMINATE']} | Gamma: NONCONTEXTUAL {g['NONCONTEXTUAL']}, "
        f"CONTEXTUAL {g['CONTEXTUAL']}, INDETERMINATE {g['INDETERMINATE']} | saturated "
        f"{c['saturated']}/{results['n_items']} | gates: {gates} | max other mass "
        f"{results['mass']['max_other']:.3g}" + extra
    )
