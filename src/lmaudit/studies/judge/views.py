"""The views of a judge results body the pipeline records: headline, metrics, tags, summary,
figure data."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from lmaudit.studies.judge.report import order_swap as order_swap_report

__all__ = ["headline", "metrics", "plot_data", "summary", "tags"]


def _primary(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [d for d in results["disagreement"] if "repeat" not in d["comparison"]]


def headline(results: Mapping[str, Any]) -> float:
    """The pooled winner-label disagreement rate against the reference (NaN if no comparison)."""
    prim = _primary(results)
    n = sum(d["n"] for d in prim)
    return sum(d["changed"] for d in prim) / n if n else float("nan")


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/ ]", "_", name)


def metrics(results: Mapping[str, Any]) -> dict[str, float]:
    v = results["validity"]
    out: dict[str, float] = {
        "n_prompts": results["n_prompts"],
        "k": results["k"],
        "n_judgments": v["judgments"],
        "n_invalid": v["invalid"],
        "n_retries": v["retries"],
    }
    h = headline(results)
    if not math.isnan(h):
        out["disagreement_rate"] = h
    for cid, s in results["conditions"].items():
        for lab, n in s["counts"].items():
            out[f"{_key(cid)}.n_{lab}"] = n
        for stat in ("mean", "median"):
            x = s["confidence"][stat]
            if x is not None:
                out[f"{_key(cid)}.confidence_{stat}"] = x
    for d in results["disagreement"]:
        k = "repeat" if "repeat" in d["comparison"] else _key(d["condition"])
        out[f"disagreement.{k}.changed"] = d["changed"]
        out[f"disagreement.{k}.n"] = d["n"]
        if d["rate"] is not None:
            out[f"disagreement.{k}.rate"] = d["rate"]
        out[f"disagreement.{k}.ci_high"] = d["ci"]["high"]
        out[f"disagreement.{k}.sign_p"] = d["sign_test"]["p"]
    cls = results["classification"]
    if cls.get("evaluable"):
        for c, n in cls["counts"].items():
            out[f"class.{c}"] = n
    pat = results.get("patterns") or {}
    if pat.get("evaluable"):
        out["pattern.n"] = pat["n"]
        out["pattern.n_both_decisive"] = pat["n_both_decisive"]
        for kind in ("attraction", "aversion"):
            out[f"pattern.{kind}"] = pat[kind]["count"]
    mw = results["model_wins"]
    if mw.get("evaluable"):
        for cid, w in mw["by_condition"].items():
            for m, n in w["wins"].items():
                out[f"wins.{_key(cid)}.{_key(m)}"] = n
    if "order_swap" in results:
        out.update(order_swap_report.metrics(results["order_swap"]))
    if "length" in results:
        out.update(order_swap_report.length_metrics(results["length"]))
    return out


def tags(results: Mapping[str, Any]) -> dict[str, str]:
    d = results["design"]
    iso = d.get("isolation")
    t = {
        "mode": str(results["mode"]),
        "isolation": iso if isinstance(iso, str) else ",".join(iso),
        "deviations": ",".join(x["id"] for x in results["deviations"]) or "none",
        "conditions": ",".join(results["conditions_analysed"]),
    }
    mw = results["model_wins"]
    if mw.get("evaluable"):
        t["ranking_changes"] = str(mw["ranking_changes"])
    fmt = results["design"].get("format")
    if fmt:
        t["import_format"] = str(fmt)
    return t


def summary(results: Mapping[str, Any]) -> str:
    parts = [f"{d['comparison']}: {d['changed']}/{d['n']}" for d in results["disagreement"]]
    cs = results["conditions"]
    counts = "; ".join(
        f"{cid} A {cs[cid]['counts']['A']} B {cs[cid]['counts']['B']} TIE {cs[cid]['counts']['TIE']} "
        f"invalid {cs[cid]['counts']['INVALID']}"
        for cid in results["conditions_analysed"]
    )
    cls = results["classification"]
    classes = (
        ", ".join(f"{c} {n}" for c, n in cls["counts"].items() if n)
        if cls.get("evaluable")
        else "classification needs P0, PA, PB and PAB"
    )
    pat = results.get("patterns") or {}
    if pat.get("evaluable"):
        classes += (
            f" | patterns: attraction {pat['attraction']['count']}, aversion {pat['aversion']['count']}"
            f" of {pat['n_both_decisive']} both decisive"
        )
    devs = ",".join(x["id"] for x in results["deviations"]) or "none"
    swap = f" | {order_swap_report.summary(results['order_swap'])}" if "order_swap" in results else ""
    if "length" in results:
        swap += f" | {order_swap_report.length_summary(results['length'])}"
    return (
        f"judge ({results['mode']}): {results['n_prompts']} prompts x k={results['k']} | "
        f"{'; '.join(parts) or 'no comparison (single condition)'} | {counts} | {classes} | "
        f"invalid {results['validity']['invalid']}/{results['validity']['judgments']} | deviations: {devs}"
        f"{swap}"
    )


def plot_data(results: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: the condition grid, the disagreement table, confidences."""
    grid = []
    for it in results["items"]:
        for cid, labels in it["labels"].items():
            for r, lab in enumerate(labels):
                grid.append(
                    {"item": it["item"], "condition": cid, "replicate": r, "winner": lab or "INVALID"}
                )
    dis = [
        {
            "comparison": d["comparison"],
            "changed": d["changed"],
            "n": d["n"],
            "rate": d["rate"] if d["rate"] is not None else "",
            "ci_low": d["ci"]["low"],
            "ci_high": d["ci"]["high"],
            "sign_p": d["sign_test"]["p"],
        }
        for d in results["disagreement"]
    ]
    conf = [
        {"condition": cid, "confidence": x}
        for cid, s in results["conditions"].items()
        for x in s["confidence"]["values"]
    ]
    out = {"grid": grid, "disagreement": dis, "confidence": conf}
    if "order_swap" in results:
        out["order_swap"] = order_swap_report.plot_rows(results["order_swap"])
    return out
