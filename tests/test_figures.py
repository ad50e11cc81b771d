"""lmaudit.figures.svg_figure: one bare, well-formed <svg> element whose bytes depend on the
data only, with every id prefixed, text kept as written, and nothing drawn off the canvas."""

from __future__ import annotations

import re

from lmaudit.figures import svg_figure
from svg_checks import parse, texts, texts_off_canvas


def _draw(label: str = "a <b> & $x$", xlabel: str = "a long x label " * 4):
    def draw(fig):
        ax = fig.add_subplot()
        ax.plot([0.0, 1.0, 2.0], [0.0, 1.0, 4.0], marker="o", label=label)
        ax.set_xticks([0, 1, 2], ["first tick label", "second tick label", "third tick label"])
        ax.set_xlabel(xlabel)
        ax.legend()

    return draw


def test_the_same_figure_gives_the_same_bytes_and_no_metadata() -> None:
    a = svg_figure(_draw(), size=(3.0, 2.0), prefix="one")
    assert a == svg_figure(_draw(), size=(3.0, 2.0), prefix="one")
    assert a.startswith("<svg") and a.rstrip().endswith("</svg>")  # no XML prolog or DOCTYPE
    assert "<metadata" not in a and "Matplotlib v" not in a and "dc:date" not in a
    assert a != svg_figure(_draw("another label"), size=(3.0, 2.0), prefix="one")


def test_ids_carry_the_prefix_and_references_resolve() -> None:
    one = svg_figure(_draw(), size=(3.0, 2.0), prefix="one")
    two = svg_figure(_draw(), size=(3.0, 2.0), prefix="two")
    ids = {s: set(re.findall(r' id="([^"]+)"', s)) for s in (one, two)}
    assert ids[one] and all(i.startswith("one-") for i in ids[one])
    assert ids[one].isdisjoint(ids[two])
    refs = set(re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', one))
    assert refs and {r for pair in refs for r in pair if r} <= ids[one]


def test_text_is_escaped_and_never_mathtext() -> None:
    svg = svg_figure(_draw(), size=(3.0, 2.0), prefix="t")
    assert "a <b> & $x$" in texts(svg)  # parsed back: escaped in the SVG, shown as written
    assert "<b>" not in svg


def test_tick_and_axis_labels_stay_on_the_canvas() -> None:
    svg = svg_figure(_draw(), size=(3.0, 2.0), prefix="t")
    assert texts_off_canvas(svg) == []
    assert {"first tick label", "third tick label"} <= set(texts(svg))


def test_the_style_applies_and_rc_overrides_it() -> None:
    def grid_lines(svg: str) -> int:
        return len(re.findall(r"stroke: #b0b0b0", svg))

    plain = svg_figure(_draw(), size=(3.0, 2.0), prefix="t")
    off = svg_figure(_draw(), size=(3.0, 2.0), prefix="t", rc={"axes.grid": False})
    assert grid_lines(plain) > 0 and grid_lines(off) == 0
    parse(off)
