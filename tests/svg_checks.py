"""Reading the reports' inline SVG figures back in tests: parsed by xml.etree, text as drawn,
tick labels as numbers, text anchors on the canvas."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
_SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹−", "-0123456789-")
_TRANSLATE = re.compile(r"translate\(([-\d.e]+)[ ,]+([-\d.e]+)\)")


def parse(svg: str) -> ET.Element:
    """The figure's root element (raises ``ET.ParseError`` when the SVG is not well-formed XML)."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def texts(svg: str) -> list[str]:
    """Every ``<text>`` element's text, in document order."""
    return ["".join(t.itertext()) for t in parse(svg).iter(f"{SVG}text")]


def _group(root: ET.Element, suffix: str) -> ET.Element:
    (g,) = [g for g in root.iter(f"{SVG}g") if g.get("id", "").endswith(suffix)]
    return g


def tick_values(svg: str, axis: str, n: int = 1) -> list[float]:
    """The numbers on the major tick labels of axis ``x`` or ``y`` of the figure's only axes
    (``n``: matplotlib's axis counter, x then y per axes). Decades written ``10⁻ⁿ`` read as 10**-n."""
    g = _group(parse(svg), f"-matplotlib.axis_{2 * n - (axis == 'x')}")
    out = []
    for tick in g.iter(f"{SVG}g"):
        if not re.fullmatch(rf".*-{axis}tick_\d+", tick.get("id", "")):
            continue
        for t in tick.iter(f"{SVG}text"):
            label = "".join(t.itertext()).translate(_SUPERSCRIPT)
            if label.startswith("10") and len(label) > 2:
                out.append(10.0 ** int(label[2:]))
            elif label:
                out.append(float(label))
    return out


def texts_off_canvas(svg: str) -> list[tuple[str, float, float]]:
    """Text drawn (partly) off the canvas, as clipped labels are: ``(text, x, y)`` of its anchor.

    Horizontal text counts from an underestimate of its extent (0.3 em a character, a cap
    height of 0.7 em; DejaVu Sans averages over 0.5 em); other text by its anchor point."""
    root = parse(svg)
    _, _, width, height = (float(v) for v in root.get("viewBox", "").split())
    off = []
    for t in root.iter(f"{SVG}text"):
        label, style, transform = "".join(t.itertext()), t.get("style", ""), t.get("transform", "")
        if t.get("x") is not None:
            x, y = float(t.get("x", "")), float(t.get("y", ""))
        else:
            m = _TRANSLATE.search(transform)
            assert m, f"text {label!r} has no position"
            x, y = float(m.group(1)), float(m.group(2))
        left = right = x
        top = y
        rotation = re.search(r"rotate\(([-\d.e]+)", transform)
        if rotation is None or float(rotation.group(1)) == 0:
            size = float(re.search(r"font-size: ([\d.]+)px", style).group(1))  # type: ignore[union-attr]
            w = 0.3 * size * len(label)
            anchor = re.search(r"text-anchor: (\w+)", style)
            shift = {"middle": 0.5, "end": 1.0}.get(anchor.group(1) if anchor else "start", 0.0)
            left, right, top = x - shift * w, x + (1 - shift) * w, y - 0.7 * size
        if left < 0 or right > width or top < 0 or y > height:
            off.append((label, x, y))
    return off
