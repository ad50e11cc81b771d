"""Report tables for echo under each rule, the like-for-like lift and the codebook metric."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmaudit.reporting import fmt

__all__ = ["echo_view"]


def _rate(e: Mapping[str, Any] | None, key: str) -> str:
    return fmt(((e or {}).get(key) or {}).get("rate"))


def _name(identity: Mapping[str, Any] | None) -> str:
    """The embedder as a reader names it: its backend and model."""
    if not identity:
        return "none (nothing embedded)"
    return " ".join(str(identity[k]) for k in ("backend", "model") if identity.get(k))


def echo_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """Echo per question at the seed's and the calibrated threshold and lexically; the lift
    against template A's and the pooled baseline; C_q, R_q and W_q under both metrics."""
    qs = results["questions"]
    cal = results.get("echo_calibration")
    echo = [
        [q, _rate(v.get("echo"), "seed"), _rate(v.get("echo"), "calibrated"), _rate(v.get("echo"), "lexical")]
        for q, v in qs.items()
    ]
    lift = []
    for q, v in qs.items():
        li = v.get("lift") or {}
        base, pooled = li.get("baseline") or {}, li.get("pooled") or {}
        if li:
            lift.append(
                [
                    q,
                    fmt(base.get("rbo")),
                    fmt(v.get("same_persona_rbo_mean")),
                    fmt(li.get("relative")),
                    fmt(pooled.get("rbo")),
                    fmt(pooled.get("relative")),
                ]
            )
    sens = []
    for q, v in qs.items():
        m = v.get("metric_sensitivity")
        if m:
            sens.append(
                [
                    q,
                    *(
                        fmt(m[k][x]) if x != "C_q" else str(m[k][x])
                        for k in ("cosine", "euclidean")
                        for x in ("C_q", "R_q", "width")
                    ),
                ]
            )
    return {
        "embedder": _name(results.get("embedder")),
        "cal": cal,
        "echo": echo,
        "lift": lift,
        "sens": sens,
        "sens_summary": results.get("codebook_metric_sensitivity"),
        "source": results.get("codebook_source"),
    }
