"""Report tables for the elicitation conditions (template and temperature contrasts), novelty
against width, the profile-stripping re-runs and the human calibration's agreement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmaudit.reporting import fmt, num, pval
from lmaudit.studies.choir.report.figures import bin_label

__all__ = ["conditions_view"]


def _ci(ci: Sequence[float] | None) -> str:
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "—"


def _contrast_rows(rows: Sequence[Mapping[str, Any]] | None, unit: str) -> list[list[str]]:
    return [
        [
            f"{unit} {r['from']:g} → {r['to']:g}" if unit == "T" else f"{r['from']} → {r['to']}",
            str(r["n_questions"]),
            fmt(r["within_member_rbo"]),
            fmt(r["R_q_change"], "+.3f"),
            f"{r['R_q_up']}/{r['n_questions']}",
        ]
        for r in rows or []
    ]


def conditions_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """What the conditions section shows; empty lists where the run has nothing to show."""
    cond = results.get("conditions") or {}
    contrasts = _contrast_rows(cond.get("template"), "template") + _contrast_rows(
        cond.get("temperature"), "T"
    )
    nov = results.get("novelty_by_width") or {}
    rho = nov.get("spearman")
    leak = results.get("leakage") or {}
    strip = [
        [
            fmt(r["threshold_similarity"], ".2f"),
            fmt(r["kept_share"]),
            fmt(r["model_accuracy"]),
            _ci(r.get("model_ci")),
            fmt(r["persona_within_model_loqo_accuracy"]),
            _ci(r.get("persona_within_model_loqo_ci")),
            fmt(r.get("persona_within_model_loqo_chance")),
        ]
        for r in leak.get("stripping") or []
    ]
    agree = ((results.get("calibration") or {}).get("agreement")) or None
    return {
        "cells": [[k, fmt(v)] for k, v in (cond.get("R_q") or {}).items() if num(v) is not None],
        "cells_missing": [k for k, v in (cond.get("R_q") or {}).items() if num(v) is None],
        "contrasts": contrasts,
        "novelty": [
            [bin_label(b), str(b["n"]), fmt(b["mean_share"]), str(b["over_half"])]
            for b in nov.get("bins") or []
        ],
        "novelty_rho": f"{fmt(rho['rho'])} (p = {pval(rho['p'])}, {rho['n']} questions)" if rho else None,
        "strip": strip,
        "agreement": agree,
    }
