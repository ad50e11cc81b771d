"""The choir report's figures from a small hand-made results dict: each well-formed SVG with its
axis labels and legend entries, tick labels on the canvas (not clipped), the same bytes twice."""

from __future__ import annotations

import re
from typing import Any

from lmaudit.studies.choir.report import render_report
from lmaudit.studies.choir.report_ranking import ranking_section
from svg_checks import texts, texts_off_canvas


def _question(r: float, width: float, lift: float, stc: float, echo: float) -> dict[str, Any]:
    return {
        "n_lists": 12, "C_q": 9, "R_q": r, "width": width, "stc": {"ratio": stc, "p": 0.02},
        "echo_rate": echo, "same_persona_rbo_mean": r + 0.05, "lift": {"relative": lift},
        "codebook_test": {"p": 0.5},
    }  # fmt: skip


def _interval(mean: float) -> dict[str, Any]:
    return {"mean": mean, "ci": [mean - 0.05, mean + 0.05]}


def _results() -> dict[str, Any]:
    bins = [
        {"lo": 0.0, "hi": 1.0, "n": 2, **{k: _interval(0.3) for k in ("unconditioned_rbo", "same_persona_rbo")},
         "stc": _interval(1.2), "relative_lift": _interval(1.1)},
        {"lo": 1.0, "hi": None, "n": 1, **{k: _interval(0.2) for k in ("unconditioned_rbo", "same_persona_rbo")},
         "stc": _interval(0.9), "relative_lift": _interval(1.3)},
    ]  # fmt: skip
    rec = {
        k: {"accuracy": a, "chance": c, "ci": [a - 0.1, a + 0.1], "null_band": [c - 0.1, c + 0.1],
            "null_mean": c, "p": 0.01, "n_cells": 24}
        for k, a, c in (("model", 0.6, 0.25), ("persona", 0.4, 0.5), ("persona_within_model_loqo", 0.1, 0.5))
    }  # fmt: skip
    summary = dict.fromkeys(
        ("above_chance", "n_questions", "n_stc", "above_chance_significant", "lift_up", "n_lift"), 2
    ) | {"novelty_over_half": 0, "n_template_novelty": 0}
    return {
        "questions": {"H001": _question(0.3, 0.4, 1.2, 1.3, 0.05), "H002": _question(0.2, 1.5, 1.4, 0.9, 0.08)},
        "summary": summary,
        "design": {"models": ["sim-1", "sim-2"], "conditions": ["A"], "lists": 24, "empty_lists": 0},
        "width_bins": bins,
        "recoverability": rec,
    }  # fmt: skip


def _figures(html: str) -> dict[str, str]:
    return dict(re.findall(r"<figure><figcaption>(.*?)</figcaption>(<svg.*?</svg>)", html, re.DOTALL))


def test_every_figure_has_its_labels_on_the_canvas_and_the_same_bytes() -> None:
    figs = _figures(render_report(_results(), None, {}))
    assert figs == _figures(render_report(_results(), None, {}))
    assert len(figs) == 5  # no cue pairs: width/lift, bins, recoverability, echo, RBO
    expected = {
        "Prompt width vs relative persona lift": {"prompt width W_q", "relative persona lift"},
        "Cross-model RBO by width bin": {"width bin", "mean cross-model RBO", "[0, 1)", "[1, ∞)",
                                         "unconditioned rbo", "same persona rbo", "STC 1.20", "STC 0.90"},
        "Recoverability": {"nearest-centroid accuracy", "model", "persona", "persona within model loqo"},
        "Echo rate vs signal-to-chance": {"echo rate", "signal-to-chance"},
        "Unconditioned vs same-persona RBO": {"unconditioned RBO", "same-persona RBO"},
    }  # fmt: skip
    for caption, labels in expected.items():
        (svg,) = [s for c, s in figs.items() if c.startswith(caption)]
        assert labels <= set(texts(svg)), caption
        assert texts_off_canvas(svg) == [], caption


def _cohort(pool: str | None, source: str | None) -> dict[str, Any]:
    return {
        "advanced_pool": pool, "advanced_source": source, "decided_by": "finalists", "tie": pool is None,
        "stage1": {"n_valid": 3, "n_ballots": 3}, "stage2": {"n_valid": 3, "n_ballots": 3}, "top": None,
    }  # fmt: skip


def test_the_ranking_figure_names_pools_cohorts_and_legend() -> None:
    cohorts = {
        "conditioned": _cohort("conditioned_rare", "conditioned"),
        "unconditioned": _cohort(None, None),
    }
    share = {"count": 1, "n": 1, "share": 1.0, "ties": 0, "decided_by": {"finalists": 1}}
    ranking = {
        "summary": {"n_ballots": 6, "n_valid": 6, "n_invalid": 0, "n_completed": 0, "invalid_by_error": {},
                    **dict.fromkeys(("conditioned_cohort", "unconditioned_cohort", "agree_top", "agree_family"), share)},
        "questions": {"H001": {"cohorts": cohorts, "agree_top": False, "n_candidates": 6}},
    }  # fmt: skip
    (svg,) = [m for p in ranking_section(ranking) for m in re.findall(r"<svg.*?</svg>", p, re.DOTALL)]
    assert "".join(ranking_section(ranking)).count(svg) == 1  # the same bytes on a second render
    got = set(texts(svg))
    assert {"H001", "conditioned rare", "tie", "differ", "conditioned cohort", "unconditioned cohort"} <= got
    assert {"conditioned-source advanced pool", "unconditioned-source advanced pool"} <= got
    assert texts_off_canvas(svg) == []
