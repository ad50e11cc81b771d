"""Report tables for the elicitation conditions (template and temperature contrasts), novelty
against width, the profile-stripping re-runs and the human calibration's agreement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lmaudit.reporting import fmt, interval_text, pval
from lmaudit.studies.choir.report.figures import bin_label
from lmaudit.studies.choir.results import ChoirResults, ContrastSummary

__all__ = ["conditions_view"]


def _contrast_rows(rows: Sequence[ContrastSummary] | None, unit: str) -> list[list[str]]:
    return [
        [
            f"{unit} {r.from_:g} → {r.to:g}" if unit == "T" else f"{r.from_} → {r.to}",
            str(r.n_questions),
            fmt(r.within_member_rbo),
            fmt(r.R_q_change, "+.3f"),
            f"{r.R_q_up}/{r.n_questions}",
        ]
        for r in rows or ()
    ]


def conditions_view(results: ChoirResults) -> dict[str, Any]:
    """What the conditions section shows; empty lists where the run has nothing to show."""
    cond = results.conditions
    cells = cond.R_q if cond else {}
    contrasts = (
        _contrast_rows(cond.template, "template") + _contrast_rows(cond.temperature, "T") if cond else []
    )
    nov = results.novelty_by_width
    rho = nov.spearman if nov else None
    strip = [
        [
            fmt(r.threshold_similarity, ".2f"),
            fmt(r.kept_share),
            fmt(r.model_accuracy),
            interval_text(r.model_ci),
            fmt(r.persona_within_model_loqo_accuracy),
            interval_text(r.persona_within_model_loqo_ci),
            fmt(r.persona_within_model_loqo_chance),
        ]
        for r in (results.leakage.stripping if results.leakage else ())
    ]
    return {
        "cells": [[k, fmt(v)] for k, v in cells.items() if v is not None],
        "cells_missing": [k for k, v in cells.items() if v is None],
        "contrasts": contrasts,
        "novelty": [
            [bin_label(b), str(b.n), fmt(b.mean_share), str(b.over_half)] for b in (nov.bins if nov else ())
        ],
        "novelty_rho": f"{fmt(rho.rho)} (p = {pval(rho.p)}, {rho.n} questions)" if rho else None,
        "strip": strip,
        "agreement": results.calibration.agreement if results.calibration else None,
    }
