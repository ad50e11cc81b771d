"""The judge report's confidence histograms: one row per condition with its name, n and the
count of every non-empty bin, well-formed SVG, the same bytes twice."""

from __future__ import annotations

from lmaudit.studies.judge.report.figures import confidence_counts, confidence_svg, disagreement_svg
from lmaudit.studies.judge.sections import Comparison
from svg_checks import texts, texts_off_canvas, tick_values

VALUES = {"P0": [0.05, 0.3, 0.3, 0.95, 1.0], "PA": [0.7] * 3, "empty": []}


def test_bins_are_half_open_and_the_last_is_closed() -> None:
    assert confidence_counts([0.0, 0.1, 0.3, 0.99, 1.0]) == [1, 1, 0, 1, 0, 0, 0, 0, 0, 2]
    assert confidence_counts([-0.2, 1.7]) == [1] + [0] * 8 + [1]


def test_one_row_per_condition_with_counts_and_bytes() -> None:
    svg = confidence_svg(VALUES)
    assert svg == confidence_svg(VALUES)
    got = texts(svg)
    assert {"P0", "n=5", "PA", "n=3", "self-reported confidence"} <= set(got)
    assert "empty" not in got  # a condition without values gets no row
    # bar labels: P0 has 1 in [0, 0.1), 2 in [0.3, 0.4), 2 in [0.9, 1]; PA has 3 in [0.7, 0.8)
    assert sorted(t for t in got if t in {"1", "2", "3"}) == ["1", "2", "2", "3"]
    assert tick_values(svg, "x", n=2) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]  # the bottom row's axis
    assert texts_off_canvas(svg) == []


def test_no_values_gives_no_figure() -> None:
    assert confidence_svg({"P0": []}) == ""


def _comparison(name: str, changed: int, n: int, repeat: bool = False) -> Comparison:
    return Comparison.from_json(
        {
            "id": name,
            "comparison": name,
            "condition": name.split()[0],
            "reference": "P0",
            **({"repeat_pairs": [[0, 1]]} if repeat else {}),
            "changed": changed,
            "n": n,
            "rate": changed / n if n else None,
            "ci": {"low": 0.1, "high": 0.7, "alpha": 0.05, "method": "clopper-pearson"},
            "excluded_invalid": 0,
            "changed_prompts": [],
            "per_item": {},
            "sign_test": {"toward_A": 0, "toward_B": 0, "p": 1.0, "method": "exact binomial"},
        }
    )


def test_disagreement_rows_with_counts_on_the_canvas() -> None:
    rows = [
        _comparison("PA vs P0", 4, 10),
        _comparison("a_long_condition_name vs P0", 0, 10),
        _comparison("P0 vs P0 (repeat)", 1, 5, repeat=True),
        _comparison("SWAP vs P0", 0, 0),  # no pair: no row
    ]
    svg = disagreement_svg(rows, 0.05)
    assert svg == disagreement_svg(rows, 0.05)
    got = texts(svg)
    assert {"PA vs P0", "a_long_condition_name vs P0", "P0 vs P0 (repeat)", "4/10", "0/10", "1/5"} <= set(got)
    assert "SWAP vs P0" not in got
    assert texts_off_canvas(svg) == []
    assert disagreement_svg(rows[3:], 0.05) == ""
