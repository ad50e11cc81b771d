"""The draws report's figures from one small family: well-formed SVG with their axis labels
and legend entries, the marks inside the axes, the same bytes twice."""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

import numpy as np
from draws_helpers import FAST, family

from lmaudit.studies.draws.analysis import analyze_records
from lmaudit.studies.draws.importer import SequenceRecord
from lmaudit.studies.draws.report.figures import null_svg, rho_curve_svg
from lmaudit.studies.draws.results import Family, PermutationNull, RhoCurve
from svg_checks import texts, texts_off_canvas, tick_values


@cache
def _analysed() -> Family:
    rng = np.random.default_rng(1)
    recs = [
        SequenceRecord("m", "s", "c", f"p{i}", tuple(x), None) for i, x in enumerate(family(rng, 8, 6, 0.2))
    ]
    return analyze_records(recs, FAST, exclude_patterns=[]).families["m"]


def _family(**extra: Any) -> Family:
    """A family's typed results with the numbers the figures are checked against."""
    fields: dict[str, Any] = {
        "T": 3.0,
        "critical_value": 2.0,
        "null": PermutationNull(T=(-1.0, 0.0, 1.0, 2.0), count=(1, 4, 4, 1), B=10),
        "rho_curve": RhoCurve(rho=(0.0, 0.1, 0.2), share_le=(1.0, 0.4, 0.01)),
        "rho_upper": 0.15,
        "rho_upper_label": "0.15",
    }
    return dataclasses.replace(_analysed(), **{**fields, **extra})


def test_null_figure_labels_legend_and_bytes() -> None:
    svg = null_svg(_family(), "n0")
    assert svg is not None and svg == null_svg(_family(), "n0")
    got = set(texts(svg))
    assert {"T = Σ (R − E₀)", "share of permutations"} <= got
    assert {"permutation null (B = 10)", "observed T = 3.00", "95th percentile = 2.00"} <= got
    assert max(tick_values(svg, "x")) >= 3.0  # the observed T, outside the null's support, is shown
    assert texts_off_canvas(svg) == []


def test_rho_curve_labels_legend_and_bytes() -> None:
    svg = rho_curve_svg(_family(), 0.05, "r0")
    assert svg is not None and svg == rho_curve_svg(_family(), 0.05, "r0")
    got = set(texts(svg))
    assert {"ρ (persistence)", "share", "ρ_upper: 0.15"} <= got
    assert {"share of simulated T ≤ observed T", "α = 0.05", "ρ_upper = 0.15"} <= got
    assert texts_off_canvas(svg) == []


def test_nothing_to_draw_gives_none() -> None:
    assert null_svg(_family(null=PermutationNull(T=(1.0,), count=(0,), B=0)), "n") is None
    assert null_svg(_family(null=PermutationNull(T=(), count=(), B=0)), "n") is None
    assert rho_curve_svg(_family(rho_curve=RhoCurve(rho=(), share_le=())), 0.05, "r") is None
