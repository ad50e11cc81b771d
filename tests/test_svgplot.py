"""lmaudit.svgplot: ticks by their definition, coordinates by the closed-form axis maps, data
recovered from the drawn paths, text escaped, output deterministic."""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lmaudit.studies.qq.figures import D_CLIP, label_effect_svg, saturation_cdf_svg
from lmaudit.svgplot import Axis, Plot, decade_label, linear_ticks, log_ticks, number_label

SVG = "{http://www.w3.org/2000/svg}"
STEPS = (1.0, 2.0, 2.5, 5.0)


def _path_points(d: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r"[ML](-?[\d.]+),(-?[\d.]+)", d)]


def test_linear_ticks_closed_forms() -> None:
    assert linear_ticks(0.0, 1.02) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]  # step 0.1 would give 11 > 8
    assert linear_ticks(-1.05, 1.05) == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert linear_ticks(-34.0, 61.0) == [-20.0, 0.0, 20.0, 40.0, 60.0]  # 10 gives 10 ticks
    assert linear_ticks(-0.025, 0.525) == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    assert linear_ticks(0.0, 0.0561) == [0.0, 0.01, 0.02, 0.03, 0.04, 0.05]
    with pytest.raises(ValueError, match="finite and increasing"):
        linear_ticks(1.0, 1.0)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(1e-4, 1e6, allow_nan=False),
    st.integers(3, 10),
)
def test_linear_ticks_are_the_finest_round_steps_that_fit(lo: float, span: float, most: int) -> None:
    assume(span >= 1e-6 * max(1.0, abs(lo)))  # ranges a figure meets, far from float resolution
    hi = lo + span
    ticks = linear_ticks(lo, hi, most)
    assert 1 <= len(ticks) <= most
    tol = 1e-9 * max(abs(lo), abs(hi), span)
    assert all(lo - tol <= t <= hi + tol for t in ticks)
    if len(ticks) >= 2:
        step = ticks[1] - ticks[0]
        power = 10.0 ** math.floor(math.log10(step) + 1e-9)
        m = min((*STEPS, 10.0), key=lambda m: abs(step - m * power))
        assert math.isclose(step, m * power, rel_tol=1e-6)
        assert all(math.isclose(b - a, step, rel_tol=1e-6) for a, b in itertools.pairwise(ticks))
        # no multiple of the step inside the range is left out
        assert ticks[0] - step < lo - tol / 2 or math.isclose(ticks[0] - step, lo, rel_tol=1e-9, abs_tol=tol)
        assert ticks[-1] + step > hi + tol / 2 or math.isclose(
            ticks[-1] + step, hi, rel_tol=1e-9, abs_tol=tol
        )
        # and the next finer round step would give more than `most` ticks
        finer = {1.0: 0.5 * power, 2.0: power, 2.5: 2 * power, 5.0: 2.5 * power, 10.0: 5 * power}[m]
        assert math.floor(hi / finer + 1e-9) - math.ceil(lo / finer - 1e-9) + 1 > most


def test_log_ticks_and_labels() -> None:
    assert log_ticks(1e-15, 1.0) == [10.0**e for e in range(-14, 1, 2)]  # 16 decades: every other
    assert log_ticks(0.05, 200.0) == [0.1, 1.0, 10.0, 100.0]
    assert [decade_label(t) for t in (1e-14, 1e-2, 1.0, 1e3)] == ["10⁻¹⁴", "10⁻²", "1", "10³"]
    assert [number_label([-1.0, -0.5, 0.0, 0.5])(v) for v in (-1.0, 0.0, 0.5)] == ["−1.0", "0.0", "0.5"]
    assert [number_label([0.0, 0.25, 0.5])(v) for v in (0.0, 0.25)] == ["0.00", "0.25"]
    with pytest.raises(ValueError, match="0 < lo < hi"):
        log_ticks(0.0, 1.0)


def test_coordinates_follow_the_axis_maps() -> None:
    fig = Plot(300.0, 200.0, "t", margins=(40.0, 10.0, 20.0, 30.0))
    fig.x = Axis(1e-4, 1.0, log=True)
    fig.y = Axis(-1.0, 3.0)
    left, top, w, h = fig.area()
    assert (left, top, w, h) == (40.0, 20.0, 250.0, 150.0)
    fig.scatter([1e-3, 0.1], [0.0, 2.0], colour="#000", series="pts")
    root = ET.fromstring(fig.svg())
    dots = [(float(c.get("cx")), float(c.get("cy"))) for c in root.iter(f"{SVG}circle")]
    # log10: 1e-3 is a quarter of the way from 1e-4 to 1, 0.1 three quarters; y = 0 and 2 of -1..3
    assert dots == [(40 + 250 / 4, 20 + 150 * 3 / 4), (40 + 250 * 3 / 4, 20 + 150 / 4)]
    eq = Plot(300.0, 200.0, "e", margins=(40.0, 10.0, 20.0, 30.0))
    eq.x = Axis(0.0, 2.0)
    eq.y = Axis(0.0, 1.0)
    eq.equal = True
    assert eq.px(1.0) - eq.px(0.0) == pytest.approx(eq.py(0.0) - eq.py(1.0))
    assert eq.area()[2] == 250.0 and eq.area()[3] == 125.0 and eq.area()[1] == pytest.approx(20.0 + 12.5)


def test_text_is_escaped_ids_prefixed_and_output_deterministic() -> None:
    def draw() -> str:
        fig = Plot(200.0, 150.0, "pfx")
        fig.x = Axis(0.0, 1.0, title="x <b>&")
        fig.y = Axis(0.0, 1.0)
        fig.line([0.0, 1.0], [0.0, 1.0], colour="#123456", label="<script>alert(1)</script>")
        fig.text(0.5, 0.5, 'item "<i>"')
        fig.legend("upper right")
        return fig.svg()

    a, b = draw(), draw()
    assert a == b
    assert "<script>" not in a and "<b>" not in a and "<i>" not in a
    root = ET.fromstring(a)
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert {"x <b>&", "<script>alert(1)</script>", 'item "<i>"'} <= texts
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert ids and all(i.startswith("pfx") for i in ids)
    with pytest.raises(ValueError, match="2 x values for 3"):
        Plot(10, 10, "x").line([0, 1], [0, 1, 2], colour="#000")
    with pytest.raises(ValueError, match="legend location"):
        Plot(10, 10, "x").legend("centre")


def _results(ps_ab: list[float], ps_yn: list[float], q: dict[str, tuple[float, float]]) -> dict:
    items = [
        {
            "item": "ab",
            "mappings": [{"mapping": "map1", "cells": [{"positions": [{"p": p} for p in ps_ab]}]}],
        },
        {
            "item": "yn",
            "mappings": [{"mapping": "yesno", "cells": [{"positions": [{"p": p} for p in ps_yn]}]}],
        },
    ]
    items += [
        {"item": name, "mappings": [{"mapping": "map1", "q": q1}, {"mapping": "map2", "q": q2}]}
        for name, (q1, q2) in q.items()
    ]
    return {"items": items, "saturation": {"threshold": 0.99}}


def test_figure_1_draws_each_groups_empirical_cdf() -> None:
    rng = np.random.default_rng(7)
    ps_ab = [1.0, 0.5, *rng.uniform(0.0, 1.0, 40).tolist()]
    ps_yn = rng.uniform(0.9, 1.0, 12).tolist()
    svg = saturation_cdf_svg(_results(ps_ab, ps_yn, {}))
    assert svg is not None
    root = ET.fromstring(svg)
    paths = {p.get("data-series"): p.get("d") for p in root.iter(f"{SVG}path") if p.get("data-series")}
    assert set(paths) == {"A/B items", "Yes/No items", "all"}
    # the plot area of figure 1 and its axes: x log10 from D_CLIP/10 to 1, y from 0 to 1.02
    left, top, w, h = 47.5, 24.0, 475.2 - 47.5 - 9.5, 266.4 - 24.0 - 40.0
    lo = math.log10(D_CLIP / 10)
    for name, ps in (("A/B items", ps_ab), ("Yes/No items", ps_yn), ("all", ps_ab + ps_yn)):
        pts = _path_points(paths[name])
        x = np.array([10 ** (lo + (px - left) / w * -lo) for px, _ in pts])
        y = np.array([(top + h - py) / h * 1.02 for _, py in pts])
        d = np.sort(np.maximum([1 - max(p, 1 - p) for p in ps], D_CLIP))
        n = len(d)
        # corners of the post-step curve: (d_i, (i-1)/n) then (d_i, i/n), after the start at 0
        assert y[0] == pytest.approx(0.0, abs=1e-4)
        np.testing.assert_allclose(y[2::2], np.arange(1, n + 1) / n, atol=2e-4)
        np.testing.assert_allclose(y[1::2], np.arange(0, n) / n, atol=2e-4)
        np.testing.assert_allclose(np.log10(x[1::2]), np.log10(d), atol=5e-4 * -lo)


def test_figure_2_places_items_and_labels_the_far_ones() -> None:
    q = {"s1-01": (0.1, 0.12), "s2-03": (-0.4, 0.5), "<odd & id>": (0.9, 0.2)}
    svg = label_effect_svg(_results([0.5], [0.5], q), annotate_above=0.3)
    assert svg is not None
    root = ET.fromstring(svg)
    groups = {g.get("data-series"): g for g in root.iter(f"{SVG}g") if g.get("data-series")}
    near = [(float(c.get("cx")), float(c.get("cy"))) for c in groups["near"]]
    far = [(float(c.get("cx")), float(c.get("cy"))) for c in groups["far"]]
    assert len(near) == 1 and len(far) == 2
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert {"s2-03", "<odd & id>"} <= texts and "s1-01" not in texts
    # equal axes: the unit square's corners map to a square
    (x1, y1), (x2, y2) = far
    assert (x2 - x1) / (0.9 + 0.4) == pytest.approx(-(y2 - y1) / (0.2 - 0.5), rel=1e-3)


def test_points_without_a_place_are_left_out_and_break_the_line() -> None:
    fig = Plot(300.0, 200.0, "g", margins=(40.0, 10.0, 20.0, 30.0))
    fig.x = Axis(0.01, 100.0, log=True)
    fig.y = Axis(0.0, 1.0)
    fig.line(
        [0.1, 1.0, float("nan"), 10.0, 0.0, 50.0],
        [0.2, 0.4, 0.5, 0.6, 0.7, float("inf")],
        colour="#000",
        series="l",
    )
    fig.scatter([0.1, -1.0, 1.0], [0.5, 0.5, float("nan")], colour="#000", series="s")
    root = ET.fromstring(fig.svg())
    (path,) = [p for p in root.iter(f"{SVG}path") if p.get("data-series") == "l"]
    d = path.get("d")
    assert "nan" not in d and "inf" not in d
    assert re.findall(r"[ML]", d) == ["M", "L", "M"]  # 0.1, 1 | 10 (x = 0 has no place on a log axis)
    (dots,) = [g for g in root.iter(f"{SVG}g") if g.get("data-series") == "s"]
    assert len(list(dots)) == 1
    with pytest.raises(ValueError, match="finite and increasing"):
        fig.y = Axis(1.0, 1.0)
    with pytest.raises(ValueError, match="positive range"):
        fig.x = Axis(0.0, 1.0, log=True)
    fig.y = Axis(0.1, 1.0, log=True)
    with pytest.raises(ValueError, match="linear y axis"):
        fig.bars([1.0], [0.5], bar_width=0.5, fill="#000", edge="#000")
