"""The choir report's figures from small hand-made typed results: each well-formed SVG with its
axis labels and legend entries and a caption under it, tick labels on the canvas (not clipped), the
same bytes twice."""

from __future__ import annotations

import re
from typing import Any

from lmaudit.studies.choir.report.page import render_report
from lmaudit.studies.choir.report.ranking import ranking_view
from lmaudit.studies.choir.results import ChoirResults, Ranking
from lmaudit.studies.layout import ReportInputs
from svg_checks import texts, texts_off_canvas


def _question(r: float, width: float, lift: float, stc: float, echo: float) -> dict[str, Any]:
    salience = {"groups": [], "columns": ["concept", "group", "s", "lists"], "rows": [], "codebook": []}
    cells = {
        "cells": [],
        "columns": ["concept", "cell", "s", "lists"],
        "salience": [],
        "R_q": {},
        "template": None,
        "temperature": None,
    }
    baseline = {"template": "A", "rbo": r, "n_lists": 6, "n_lists_conditioned": 6}
    return {
        "n_models": 2, "n_models_unconditioned": 2, "n_models_per_persona": {}, "n_lists": 12,
        "n_items": 40, "n_concepts": 12, "n_clusters": 9, "n_noise_items": 3, "C_q": 9, "R_q": r,
        "width": width, "same_persona_rbo": {}, "same_persona_rbo_mean": r + 0.05,
        "lift": {"absolute": 0.05, "relative": lift, "baseline": baseline, "pooled": None},
        "stc": {"observed": r, "null_mean": r / stc, "ratio": stc, "p": 0.02, "null": "reassignment"},
        "stc_ranking_shuffle": None, "template_novelty": None, "echo": None, "echo_rate": echo,
        "codebook_test": {"chi2": 1.0, "cramers_v": 0.1, "p": 0.5}, "top_concepts": {},
        "salience": salience, "conditions": cells, "salience_ties": {"tied_share": 0.0, "R_q_tie_rule": r},
    }  # fmt: skip


def _interval(mean: float) -> dict[str, Any]:
    return {"mean": mean, "ci": [mean - 0.05, mean + 0.05]}


_COUNTS = ("above_chance", "n_questions", "n_stc", "above_chance_significant", "lift_up", "n_lift")
_ZEROS = (
    "novelty_over_half",
    "n_template_novelty",
    "above_chance_ranking_shuffle",
    "n_degenerate_items",
    "above_chance_significant_ranking_shuffle",
    "n_codebook_test",
    "codebook_reject",
    "codebook_reject_001",
)
_NONES = ("mean_relative_lift", "salience_tied_share", "echo_calibrated_threshold", "mean_echo_seed",
          "mean_echo_calibrated", "mean_echo_lexical", "above_chance_share", "lift_up_share", "lift_low_width",
          "lift_high_width", "recover_excess_gap", "recover_model_minus_persona")  # fmt: skip


def _doc() -> dict[str, Any]:
    bins = [
        {"lo": 0.0, "hi": 1.0, "n": 2, **{k: _interval(0.3) for k in ("unconditioned_rbo", "same_persona_rbo")},
         "stc": _interval(1.2), "relative_lift": _interval(1.1)},
        {"lo": 1.0, "hi": None, "n": 1, **{k: _interval(0.2) for k in ("unconditioned_rbo", "same_persona_rbo")},
         "stc": _interval(0.9), "relative_lift": _interval(1.3)},
    ]  # fmt: skip
    rec = {
        k: {"accuracy": a, "chance": c, "ci": [a - 0.1, a + 0.1], "null_band": [c - 0.1, c + 0.1],
            "null_mean": c, "p": 0.01, "n_cells": 24, "per_stratum": {}}
        for k, a, c in (("model", 0.6, 0.25), ("persona", 0.4, 0.5), ("persona_within_model_loqo", 0.1, 0.5))
    }  # fmt: skip
    summary = dict.fromkeys(_COUNTS, 2) | dict.fromkeys(_ZEROS, 0) | dict.fromkeys(_NONES)
    design = {
        "models": ["sim-1", "sim-2"],
        "questions": 2,
        "conditions": ["A"],
        "lists": 24,
        "empty_lists": 0,
        "degenerate_items": 0,
        "refused_lists": {"n": 0, "reasons": {}},
        "extraction": {"method": "rule"},
    }
    return {
        "study": "choir",
        "questions": {"H001": _question(0.3, 0.4, 1.2, 1.3, 0.05), "H002": _question(0.2, 1.5, 1.4, 0.9, 0.08)},
        "summary": summary,
        "design": design,
        "embedder": None,
        "codebook_source": "clustered",
        "width_bins": bins,
        "recoverability": rec,
        **dict.fromkeys(("leakage", "cue_stripping", "echo_calibration", "codebook_metric_sensitivity",
                         "conditions", "novelty_by_width", "ranking", "calibration")),
    }  # fmt: skip


def _results() -> ChoirResults:
    return ChoirResults.from_json(_doc())


def _figures(html: str) -> dict[str, str]:
    """Each figure by the bold start of the caption under it."""
    pairs = re.findall(r'(<svg.*?</svg>)\s*<p class="caption"><b>(.*?)</b>', html, re.DOTALL)
    return {caption: svg for svg, caption in pairs}


def test_every_figure_has_its_labels_on_the_canvas_and_the_same_bytes() -> None:
    figs = _figures(render_report(ReportInputs(_results())))
    assert figs == _figures(render_report(ReportInputs(_results())))
    assert len(figs) == 5  # no cue pairs: width/lift, bins, recoverability, echo, RBO
    expected = {
        "Prompt width vs relative persona lift": {"prompt width W_q", "relative persona lift", "H001", "H002",
                                                  "lift = 1 (persona changes nothing)"},
        "Cross-model RBO by width bin": {"width bin", "mean cross-model RBO", "[0, 1)", "[1, ∞)",
                                         "unconditioned RBO", "same-persona RBO", "STC 1.20", "STC 0.90"},
        "Can the lists tell who wrote them?": {"nearest-centroid accuracy", "model", "persona", "persona within model",
                                               "accuracy (bar: 95% bootstrap CI)", "chance (1 / classes)",
                                               "shuffle-null 95% band"},
        "Echo rate vs signal-to-chance": {"echo rate", "signal-to-chance", "H001", "H002", "STC = 1 (chance)"},
        "Unconditioned vs same-persona RBO": {"unconditioned RBO", "same-persona RBO", "H001", "H002",
                                              "y = x (no persona effect)"},
    }  # fmt: skip
    for caption, labels in expected.items():
        (svg,) = [s for c, s in figs.items() if c.startswith(caption)]
        assert labels <= set(texts(svg)), caption
        assert texts_off_canvas(svg) == [], caption


def _cohort(pool: str | None, source: str | None) -> dict[str, Any]:
    stage = {"n_valid": 3, "n_ballots": 3}
    return {
        "advanced_pool": pool, "advanced_source": source, "decided_by": "finalists", "tie": pool is None,
        "stage1": stage | {"leader": None, "top_family": None, "tie": False},
        "stage2": stage | {"finalists": {}, "set_points": {}, "set_firsts": {}}, "top": None, "top_status": "ok",
    }  # fmt: skip


def test_the_ranking_figure_names_pools_cohorts_and_legend() -> None:
    cohorts = {
        "conditioned": _cohort("conditioned_rare", "conditioned"),
        "unconditioned": _cohort(None, None),
    }
    share = {"count": 1, "n": 1, "share": 1.0, "ties": 0}
    cohort = share | {"decided_by": {"finalists": 1}}
    stage = {"n_ballots": 3, "n_invalid": 0}
    ranking = Ranking.from_json({
        "summary": {"n_questions": 1, "n_ballots": 6, "n_valid": 6, "n_invalid": 0, "n_completed": 0,
                    "invalid_by_error": {}, "by_stage": {"stage1": stage, "stage2": stage},
                    "conditioned_cohort": cohort, "unconditioned_cohort": cohort, "agree_top": share,
                    "agree_family": share},
        "questions": {"H001": {"cohorts": cohorts, "agree_top": False, "agree_family": False, "n_candidates": 6}},
        "invalid_examples": [],
    })  # fmt: skip
    svg = ranking_view(ranking)["svg"]  # type: ignore[index]
    assert svg == ranking_view(ranking)["svg"]  # type: ignore[index]  # the same bytes on a second render
    got = set(texts(svg))
    assert {"H001", "conditioned rare", "tie", "differ", "conditioned cohort", "unconditioned cohort"} <= got
    assert {"conditioned-source advanced pool", "unconditioned-source advanced pool"} <= got
    assert "no advanced pool (tie or no valid ballot)" in got
    assert texts_off_canvas(svg) == []


def test_the_cue_pair_figure_names_each_pair_and_its_legend() -> None:
    def side(echo: float, stc: float) -> dict[str, Any]:
        return {"item_echo": echo, "cluster_echo": echo / 2, "rbo": 0.3, "stc": stc} | dict.fromkeys(
            ("item_echo_calibrated", "item_echo_lexical", "echo_rate")
        )

    lower = dict.fromkeys(("item_echo_lower", "item_echo_calibrated_lower", "item_echo_lexical_lower",
                           "cluster_echo_lower", "rbo_lower", "stc_lower"), True)  # fmt: skip
    pairs = [
        {"original": "H001", "stripped": "H001-S", "anchors": ["time"], "before": side(0.6, 1.1), "after": side(0.05, 2.2)} | lower,
        {"original": "H009", "stripped": "H009-S", "anchors": ["pun"], "before": side(0.3, 1.4), "after": side(0.1, 1.3)} | lower,
    ]  # fmt: skip
    counts = {k: {"yes": 2, "n": 2} for k in ("item_echo_lower", "cluster_echo_lower", "rbo_lower")}
    results = ChoirResults.from_json(_doc() | {"cue_stripping": {"pairs": pairs, "counts": counts}})
    html = render_report(ReportInputs(results))
    svg = _figures(html)["Matched cue pairs: anchor echo vs signal-to-chance."]
    assert {"H001", "H009", "original", "stripped", "STC = 1 (chance)", "item-level anchor echo"} <= set(
        texts(svg)
    )
    assert texts_off_canvas(svg) == []
    assert "H001 → H001-S" in html and "Stripping the anchors lowered item echo in 2 of 2" in html
