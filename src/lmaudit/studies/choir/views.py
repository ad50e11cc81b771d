"""The views of a choir results body the pipeline records: headline, metrics, tags, summary, figure data."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["headline", "metrics", "plot_data", "summary", "tags"]


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/ ]", "_", name)


def headline(results: dict[str, Any]) -> float | None:
    """The share of questions with above-chance unconditioned agreement (signal-to-chance > 1)."""
    s = results["summary"]
    return s["above_chance"] / s["n_stc"] if s["n_stc"] else None


def metrics(results: dict[str, Any]) -> dict[str, float]:
    s = results["summary"]
    out: dict[str, float] = {
        k: float(v) for k, v in s.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    out["n_models"] = float(len(results["design"]["models"]))
    for what, r in results["recoverability"].items():
        out[f"recover.{what}.accuracy"] = float(r["accuracy"])
    leak = results.get("leakage") or {}
    for k in ("question_spearman", "model_spearman"):
        rho = (leak.get(k) or {}).get("rho")
        if isinstance(rho, int | float):
            out[f"leakage.{k}"] = float(rho)
    for q, v in results["questions"].items():
        for name, x in (
            ("R_q", v["R_q"]),
            ("width", v["width"]),
            ("echo_rate", v["echo_rate"]),
            ("stc", v["stc"]["ratio"] if v["stc"] else None),
            ("relative_lift", v["lift"]["relative"] if v["lift"] else None),
        ):
            if isinstance(x, int | float):
                out[f"{_key(q)}.{name}"] = float(x)
    return out


def tags(results: dict[str, Any]) -> dict[str, str]:
    d = results["design"]
    return {"models": ",".join(d["models"])[:500], "conditions": ",".join(d["conditions"])[:500]}


def summary(results: dict[str, Any]) -> str:
    s = results["summary"]
    rec = results["recoverability"]
    parts = [
        f"choir: {s['n_questions']} questions x {len(results['design']['models'])} models",
        f"above chance {s['above_chance']}/{s['n_stc']} (significant {s['above_chance_significant']})",
        f"lift up {s['lift_up']}/{s['n_lift']}",
    ]
    for what in ("model", "persona", "persona_within_model_loqo"):
        if what in rec:
            parts.append(
                f"{what} recoverability {rec[what]['accuracy']:.3f} (chance {rec[what]['chance']:.3f})"
            )
    return " | ".join(parts)


def plot_data(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
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
    return {"width_lift": width, "width_bins": bins}
