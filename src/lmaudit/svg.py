"""Matplotlib figures as inline SVG for the choir report (the QQ and draws reports draw theirs
with :mod:`lmaudit.svgplot`, without matplotlib's import)."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_TAG = re.compile(r"<[^<>]*>")  # matplotlib escapes < and > in text and attribute values
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)


def inline_svg(fig: Figure, prefix: str, rc: Mapping[str, Any]) -> str:
    """The figure as a bare ``<svg>`` element for inlining, deterministic across runs.

    The XML prolog and the RDF metadata are dropped, and every element id (and reference to
    one) gets ``prefix``, so several figures can share one HTML page without id clashes.
    ``rc`` is the study's matplotlib style; the id hash salt is derived from ``prefix``.
    """
    from matplotlib import rc_context
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    buf = io.StringIO()
    style: Any = {**rc, "svg.hashsalt": f"lmaudit-{prefix}"}
    with rc_context(style):
        FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None})
    text = buf.getvalue()
    text = _METADATA.sub("", text[max(text.find("<svg"), 0) :])

    def fix(m: re.Match[str]) -> str:
        tag = m.group(0)
        for old in (' id="', "url(#", 'href="#'):
            tag = tag.replace(old, f"{old}{prefix}-")
        return tag

    return _TAG.sub(fix, text)
