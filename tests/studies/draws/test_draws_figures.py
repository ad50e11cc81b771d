"""The draws report's figures from one small family: well-formed SVG with their axis labels
and legend entries, the marks inside the axes, the same bytes twice."""

from __future__ import annotations

from typing import Any

from lmaudit.studies.draws.report.figures import null_svg, rho_curve_svg
from svg_checks import texts, texts_off_canvas, tick_values


def _family(**extra: Any) -> dict[str, Any]:
    return {
        "T": 3.0,
        "critical_value": 2.0,
        "null": {"T": [-1.0, 0.0, 1.0, 2.0], "count": [1, 4, 4, 1]},
        "rho_curve": {"rho": [0.0, 0.1, 0.2], "share_le": [1.0, 0.4, 0.01]},
        "rho_upper": 0.15,
        "rho_upper_label": "0.15",
        **extra,
    }


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
    assert null_svg(_family(null={"T": [1.0], "count": [0]}), "n") is None
    assert null_svg(_family(null={}), "n") is None
    assert rho_curve_svg(_family(rho_curve={}), 0.05, "r") is None
