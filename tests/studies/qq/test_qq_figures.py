"""The QQ report's figures from small hand-made typed results: well-formed SVG with the
seed's titles, axis labels and legend entries, axes fitted to the data, the same bytes twice."""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any

import pytest

from lmaudit.results import Interval
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.gates import G1Gate, G3Gate, Gates
from lmaudit.studies.qq.params import QQParams
from lmaudit.studies.qq.report.figures import label_effect_svg, saturation_cdf_svg
from lmaudit.studies.qq.results import (
    Cell,
    Counts,
    ItemResult,
    Joint,
    MappingResult,
    Mass,
    PositionEstimate,
    QQResults,
    Saturation,
)
from lmaudit.studies.qq.summary import across_items
from svg_checks import SVG, parse, texts, texts_off_canvas, tick_values

ZERO = Interval(0.0, 0.0)


def _stats(q: float, oss: float) -> dict[str, Any]:
    """The statistics fields of a mapping or item: only ``q`` and OSS matter to the figures."""
    return dict(q=q, oe_a=0.0, oe_b=0.0, oss=oss, gamma=0.0, u=0.5, v=0.5, q_env=ZERO, oe_a_env=ZERO,
                oe_b_env=ZERO, envelope_width=0.0, gamma_bounds=ZERO, verdict="SATISFIED",
                gamma_class="NONCONTEXTUAL", precision=0.0, max_other=0.0)  # fmt: skip


def _mapping(name: str, q: float, ds: list[float]) -> MappingResult:
    positions = tuple(PositionEstimate(1, "A", None, 0.0, 0.0, 0.0, 1.0 - d, d) for d in ds)
    return MappingResult(
        mapping=name, cells=(Cell("AB", Joint(0.0, 0.0, 0.0, 0.0), positions),), **_stats(q, 0.5)
    )


def _item(item: str, *mappings: MappingResult) -> ItemResult:
    return ItemResult(item=item, stratum="S1", s=0.0, n_positions=0, n_saturated_positions=0, saturated=False,
                      label_effect=None, mappings=mappings, **_stats(0.0, 0.0))  # fmt: skip


def _typed(*items: ItemResult) -> QQResults:
    """Typed results around ``items`` (every other section empty or not run)."""
    none = Counts(dict.fromkeys(env.VERDICTS, 0), dict.fromkeys(env.GAMMA_CLASSES, 0), 0)
    mass = Mass(0.0, 0.01, True, 0.0)
    return QQResults(params=QQParams(), n_items=len(items), counts=none,
                     across_items=across_items([], [], [], large_threshold=0.3),
                     saturation=Saturation(0.99, 0, len(items), ()), mass=mass, memorization=None, fits=(),
                     items=items, sampled=(),
                     gates=Gates(G1Gate("NOT_RUN", 0), mass.gate(), G3Gate("NOT_RUN", ())))  # fmt: skip


def _results(q: tuple[float, float] = (0.004, -0.003), yes_no_d: float = 0.05) -> QQResults:
    return _typed(
        _item("s1-01", _mapping("map1", q[0], [2e-4, 0.3]), _mapping("map2", q[1], [0.2, 0.4])),
        _item("s1-02", _mapping("map1", 0.008, [0.1]), _mapping("map2", 0.009, [0.1])),
        _item("s3-01", _mapping("yesno", 0.0, [yes_no_d, 0.45])),
    )


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
    assert saturation_cdf_svg(_typed()) is None
    one = _typed(*(dataclasses.replace(it, mappings=it.mappings[:1]) for it in _results().items))
    assert label_effect_svg(one) is None


# DejaVu Sans advance widths (em) of the characters tick labels use; others count as 0.64 em
_EM = {".": 0.318, "−": 0.838, "-": 0.361, ",": 0.318}


def _tick_labels(svg: str) -> list[tuple[float, float, str]]:
    """``(x, font size, text)`` of the x-axis major tick labels of the only axes, left to right."""
    (axis,) = [g for g in parse(svg).iter(f"{SVG}g") if g.get("id", "").endswith("-matplotlib.axis_1")]
    out = []
    for t in axis.iter(f"{SVG}text"):
        label = "".join(t.itertext())
        size = re.search(r"font-size: ([\d.]+)px", t.get("style", ""))
        if t.get("x") is not None and size and re.fullmatch(r"[−\d.]+", label):
            out.append((float(t.get("x", "")), float(size.group(1)), label))
    return sorted(out)


@pytest.mark.parametrize("q", [0.0, 0.0072, 0.009, 0.016, 0.08, 0.7, 0.9])
def test_figure_2_tick_labels_never_run_together(q: float) -> None:
    svg = label_effect_svg(_results(q=(q, -q / 2)), annotate_above=2.0) or ""
    labels = _tick_labels(svg)
    assert len(labels) >= 3
    for (x1, size, a), (x2, _, b) in itertools.pairwise(labels):
        half = size * (sum(_EM.get(c, 0.64) for c in a) + sum(_EM.get(c, 0.64) for c in b)) / 2
        assert x2 - x1 > half + 2, (a, b, x2 - x1, half)  # centred labels, at least 2 px apart
    assert texts_off_canvas(svg) == []


def test_figure_1_starts_near_its_data_and_keeps_its_legend_off_the_curves() -> None:
    far = _typed(_item("s1-01", _mapping("map1", 0.0, [0.05, 0.2, 0.4])))
    svg = saturation_cdf_svg(far) or ""
    assert min(tick_values(svg, "x")) == 1e-2  # the threshold line, not an empty decade below it
    ys = {"".join(t.itertext()): float(t.get("y", "nan")) for t in parse(svg).iter(f"{SVG}text")}
    xlabel = ys["distance from determinism d = 1 − max(p, 1 − p)"]
    legend = [y for s, y in ys.items() if s.startswith(("A/B items", "saturation threshold"))]
    assert legend and min(legend) > xlabel  # below the axes, where no curve runs
