"""Report tables for echo under each rule, the like-for-like lift and the codebook metric."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmaudit.reporting import fmt
from lmaudit.studies.choir.results import ChoirResults, Echo

__all__ = ["echo_view"]


def _rate(e: Echo | None, rule: str) -> str:
    return fmt(e.rate(rule) if e else None)


def _name(identity: Mapping[str, Any] | None) -> str:
    """The embedder as a reader names it: its backend and model."""
    if not identity:
        return "none (nothing embedded)"
    return " ".join(str(identity[k]) for k in ("backend", "model") if identity.get(k))


def echo_view(results: ChoirResults) -> dict[str, Any]:
    """Echo per question at the seed's and the calibrated threshold and lexically; the lift
    against template A's and the pooled baseline; C_q, R_q and W_q under both metrics."""
    qs = results.questions
    echo = [
        [q, _rate(v.echo, "seed"), _rate(v.echo, "calibrated"), _rate(v.echo, "lexical")]
        for q, v in qs.items()
    ]
    lift = [
        [
            q,
            fmt(v.lift.baseline.rbo),
            fmt(v.same_persona_rbo_mean),
            fmt(v.lift.relative),
            fmt(v.lift.pooled.rbo if v.lift.pooled else None),
            fmt(v.lift.pooled.relative if v.lift.pooled else None),
        ]
        for q, v in qs.items()
        if v.lift is not None
    ]
    sens = [
        [
            q,
            *(x for row in (m.cosine, m.euclidean) for x in (str(row.C_q), fmt(row.R_q), fmt(row.width))),
        ]
        for q, v in qs.items()
        if (m := v.metric_sensitivity) is not None
    ]
    return {
        "embedder": _name(results.embedder),
        "cal": results.echo_calibration,
        "echo": echo,
        "lift": lift,
        "sens": sens,
        "sens_summary": results.codebook_metric_sensitivity,
        "source": results.codebook_source,
    }
