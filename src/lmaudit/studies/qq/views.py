"""The views of a QQ results body the pipeline records: headline, metrics, tags, summary, figure data."""

from __future__ import annotations

from typing import Any

__all__ = ["headline", "metrics", "plot_data", "summary", "tags"]


def headline(results: dict[str, Any]) -> float:
    """The share of items whose QQ verdict is VIOLATED (returned to Hydra sweepers)."""
    n = results["n_items"]
    return results["counts"]["verdict"]["VIOLATED"] / n if n else float("nan")


def metrics(results: dict[str, Any]) -> dict[str, float]:
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
    for it in results["items"]:
        out[f"q.{it['item']}"] = it["q"]
        out[f"oss.{it['item']}"] = it["oss"]
    return out


def plot_data(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
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
    return {"distance_cdf": cdf, "label_effect": scatter}


def tags(results: dict[str, Any]) -> dict[str, str]:
    t = {f"gate.{g}": v["status"] for g, v in results["gates"].items()}
    mem = results.get("memorization")
    if mem is not None:
        t["memorization_alert"] = str(mem.get("alert"))
    return t


def summary(results: dict[str, Any]) -> str:
    c = results["counts"]
    v = c["verdict"]
    g = c["gamma_class"]
    gates = ", ".join(f"{k} {x['status']}" for k, x in results["gates"].items())
    return (
        f"QQ: {results['n_items']} items | SATISFIED {v['SATISFIED']}, VIOLATED {v['VIOLATED']}, "
        f"INDETERMINATE {v['INDETERMINATE']} | Gamma: NONCONTEXTUAL {g['NONCONTEXTUAL']}, "
        f"CONTEXTUAL {g['CONTEXTUAL']}, INDETERMINATE {g['INDETERMINATE']} | saturated "
        f"{c['saturated']}/{results['n_items']} | gates: {gates} | max other mass "
        f"{results['mass']['max_other']:.3g}"
    )
