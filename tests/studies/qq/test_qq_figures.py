"""The QQ report's figures from a small hand-made results dict: well-formed SVG with the
seed's titles, axis labels and legend entries, axes fitted to the data, the same bytes twice."""

from __future__ import annotations

import copy
from typing import Any

from lmaudit.studies.qq.figures import label_effect_svg, saturation_cdf_svg
from svg_checks import texts, texts_off_canvas, tick_values


def _mapping(name: str, q: float, ds: list[float]) -> dict[str, Any]:
    return {"mapping": name, "q": q, "oss": 0.5, "cells": [{"positions": [{"d": d} for d in ds]}]}


def _results(q: tuple[float, float] = (0.004, -0.003), yes_no_d: float = 0.05) -> dict[str, Any]:
    return {
        "items": [
            {"item": "s1-01", "mappings": [_mapping("map1", q[0], [2e-4, 0.3]), _mapping("map2", q[1], [0.2, 0.4])]},
            {"item": "s1-02", "mappings": [_mapping("map1", 0.008, [0.1]), _mapping("map2", 0.009, [0.1])]},
            {"item": "s3-01", "mappings": [_mapping("yesno", 0.0, [yes_no_d, 0.45])]},
        ],
        "saturation": {"threshold": 0.99},
    }  # fmt: skip


def test_figure_1_has_its_labels_and_legend_and_is_deterministic() -> None:
    svg = saturation_cdf_svg(_results())
    assert svg is not None and svg == saturation_cdf_svg(_results())
    got = texts(svg)
    assert {
        "Figure 1. Saturation: CDF of distance from determinism",
        "distance from determinism d = 1 − max(p, 1 − p)",
        "share of positions with distance ≤ d",
        "A/B items (n=6): 16.7% with d < 0.01",  # one of six A/B positions below 1 - 0.99
        "Yes/No items (n=2): 0.0% with d < 0.01",
        "all (n=8): 12.5% with d < 0.01",
        "saturation threshold d = 1 − 0.99",
    } <= set(got)
    assert texts_off_canvas(svg) == []


def test_figure_1_spans_the_decades_of_its_data() -> None:
    ticks = tick_values(saturation_cdf_svg(_results()) or "", "x")
    assert min(ticks) == 1e-4 and max(ticks) == 1.0  # the smallest d is 2e-4
    zero = saturation_cdf_svg(_results(yes_no_d=0.0)) or ""
    assert min(tick_values(zero, "x")) <= 1e-14  # d = 0 is drawn at D_CLIP, and says so
    assert "distance from determinism d = 1 − max(p, 1 − p)   (d = 0 drawn at 1e-14)" in texts(zero)


def test_figure_2_fits_small_label_effects_and_labels_large_ones() -> None:
    svg = label_effect_svg(_results(), annotate_above=0.3)
    assert svg is not None and svg == label_effect_svg(_results(), annotate_above=0.3)
    got = set(texts(svg))
    assert {"Figure 2. Label effect (2 A/B items)", "q under map1", "q under map2"} <= got
    assert {"q equal under both", "|Δq| ≤ 0.3"} <= got and "|Δq| > 0.3" not in got
    for axis in ("x", "y"):  # |q| <= 0.009: axes of about +-0.01, not +-1
        ticks = tick_values(svg, axis)
        assert len(ticks) >= 3 and max(abs(t) for t in ticks) <= 0.0099 * 1.1
        assert min(ticks) == -max(ticks)  # symmetric about 0
    far = label_effect_svg(_results(q=(-0.6, 0.7)), annotate_above=0.3) or ""
    assert {"s1-01", "|Δq| > 0.3"} <= set(texts(far)) and "s1-02" not in texts(far)
    assert max(tick_values(far, "y")) >= 0.6
    assert texts_off_canvas(far) == []


def test_nothing_to_draw_gives_none() -> None:
    assert saturation_cdf_svg({"items": []}) is None
    one = copy.deepcopy(_results())
    for item in one["items"]:
        item["mappings"] = item["mappings"][:1]
    assert label_effect_svg(one) is None
