"""The reports' figures: a matplotlib figure drawn under the reports' style, as inline SVG.

:func:`svg_figure` is the one way every study turns a figure into the bare ``<svg>`` element
its HTML report inlines. The output depends on the data only (same data, same bytes): the id
hash salt is fixed, no metadata (date, creator) is written, and text stays text
(``svg.fonttype: none``), XML-escaped by matplotlib. matplotlib is imported on first use, so
importing a report module does not load it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["HASH_SALT", "STYLE", "svg_figure"]

# text.parse_math off: labels (item ids, condition names) are shown as written, never as mathtext
STYLE: Mapping[str, Any] = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.size": 9.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
HASH_SALT = "lmaudit"
# None drops an entry; with all four dropped matplotlib writes no <metadata> element
_NO_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
_TAG = re.compile(r"<[^<>]*>")  # matplotlib escapes < and > in text and attribute values


def svg_figure(
    draw: Callable[[Figure], object],
    *,
    size: tuple[float, float],
    prefix: str,
    rc: Mapping[str, Any] | None = None,
) -> str:
    """``draw(fig)`` on a new figure of ``size`` inches, returned as a bare ``<svg>`` element.

    The figure is created, drawn and saved under :data:`STYLE` updated by ``rc``, with
    constrained layout and a tight bounding box, so no label is clipped. Every element id
    (and reference to one) is prefixed with ``prefix``, so figures can share one page.
    """
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    style: Any = {**STYLE, **(rc or {}), "svg.hashsalt": HASH_SALT}
    buf = io.StringIO()
    with rc_context(style):
        fig = Figure(figsize=size, layout="constrained")
        draw(fig)
        fig.savefig(buf, format="svg", metadata=_NO_METADATA, bbox_inches="tight", pad_inches=0.04)
    text = buf.getvalue()
    start = text.find("<svg")
    if start < 0:
        raise RuntimeError(f"figure {prefix!r}: matplotlib wrote no <svg> element")

    def fix(m: re.Match[str]) -> str:
        tag = m.group(0)
        for old in (' id="', "url(#", 'href="#'):
            tag = tag.replace(old, f"{old}{prefix}-")
        return tag

    return _TAG.sub(fix, text[start:])
