"""The ``order_swap`` section's views: MLflow metrics, the summary line, figure data for
``dvc plots`` and the rows of the report's position table (one per group of pairs)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["GROUPS", "metrics", "plot_rows", "summary", "table"]

# the section's groupings: results key, metric prefix, the report's heading
GROUPS = (
    ("by_judge_prompt", "prompt", "judge prompt"),
    ("by_turn", "turn", "turn"),
    ("by_model_pair", "pair", "model pair"),
)


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/ ]", "_", name)


def _block_metrics(b: Mapping[str, Any], prefix: str, full: bool) -> dict[str, float]:
    out: dict[str, float] = {}
    names = b["counts"] if full else ("n", "first_both", "second_both")
    for k in names:
        out[f"{prefix}.{k}"] = b["counts"][k]
    for reading, short in (("flipped", "flipped_first"), ("per_verdict", "first")):
        r = b[reading]
        if r["rate"] is not None:
            out[f"{prefix}.{short}_rate"] = r["rate"]
        out[f"{prefix}.{short}_ci_low"] = r["ci"]["low"]
        out[f"{prefix}.{short}_ci_high"] = r["ci"]["high"]
        out[f"{prefix}.{short}_p"] = r["p"]
    return out


def metrics(section: Mapping[str, Any]) -> dict[str, float]:
    """``order_swap.<count>`` and ``order_swap.{flipped_first,first}_{rate,ci_low,ci_high,p}``
    overall; per group ``order_swap.<group>.<name>.`` with n, first_both, second_both and the rates."""
    out = _block_metrics(section, "order_swap", full=True)
    for key, short, _ in GROUPS:
        for name, b in section[key].items():
            out.update(_block_metrics(b, f"order_swap.{short}.{_key(name)}", full=False))
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def summary(section: Mapping[str, Any]) -> str:
    c, f, v = section["counts"], section["flipped"], section["per_verdict"]
    return (
        f"order swap: {c['n']} pairs, consistent {c['consistent']}, first_both {c['first_both']}, "
        f"second_both {c['second_both']}, one_tie {c['one_tie']}, invalid {c['invalid']}; "
        f"first position wins {_pct(f['rate'])} of flipped pairs (p {f['p']:.3g}), "
        f"{_pct(v['rate'])} of verdicts (p {v['p']:.3g})"
    )


def _row(group: str, name: str, b: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "group": group,
        "name": name,
        **b["counts"],
        "flipped": b["flipped"],
        "per_verdict": b["per_verdict"],
    }


def table(section: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per group of pairs: overall first, then each judge prompt, turn and model pair."""
    rows = [_row("overall", "all pairs", section)]
    for key, _, label in GROUPS:
        rows += [_row(label, name, b) for name, b in section[key].items()]
    return rows


def plot_rows(section: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Figure data for ``dvc plots``: each group's counts and both first-position win rates."""
    out = []
    for r in table(section):
        f, v = r["flipped"], r["per_verdict"]
        out.append(
            {
                "group": r["group"],
                "name": r["name"],
                **{k: r[k] for k in ("n", "consistent", "first_both", "second_both", "one_tie", "invalid")},
                "flipped_first_rate": f["rate"] if f["rate"] is not None else "",
                "flipped_ci_low": f["ci"]["low"],
                "flipped_ci_high": f["ci"]["high"],
                "flipped_p": f["p"],
                "first_rate": v["rate"] if v["rate"] is not None else "",
                "first_ci_low": v["ci"]["low"],
                "first_ci_high": v["ci"]["high"],
                "first_p": v["p"],
            }
        )
    return out
