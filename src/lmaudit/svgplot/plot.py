"""The canvas of :mod:`lmaudit.svgplot`: one set of axes, its marks and legend, as SVG."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from lmaudit.svgplot.scales import Axis

__all__ = ["CHAR_WIDTH", "Plot"]

CHAR_WIDTH = 0.58  # estimated advance of one character, as a share of the font size
FONT = "'DejaVu Sans', 'Bitstream Vera Sans', Arial, Helvetica, sans-serif"


def _f(v: float) -> str:
    """A coordinate: two decimals, no trailing zeros, no ``-0``."""
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


@dataclass
class _Entry:
    label: str
    kind: str  # "line", "marker", "patch"
    style: dict[str, str] = field(default_factory=dict)


class Plot:
    """One set of axes on a ``width`` x ``height`` point canvas; ``margins`` (left, right, top,
    bottom) in points hold the tick labels, axis titles and title. ``x`` and ``y`` are the
    axes (:class:`Axis`), set before marks are added; ``equal`` makes one data unit the same
    length on both axes (the plot area shrinks and is centred)."""

    def __init__(
        self,
        width: float,
        height: float,
        prefix: str,
        *,
        margins: tuple[float, float, float, float] = (48.0, 10.0, 24.0, 40.0),
        font_size: float = 9.0,
    ) -> None:
        self.width, self.height, self.prefix, self.font_size = width, height, prefix, font_size
        self.margins = margins
        self.x, self.y = Axis(), Axis()
        self.title = ""
        self.equal = False
        self._marks: list[str] = []  # clipped to the plot area
        self._free: list[str] = []  # drawn over it, unclipped
        self._legend: list[_Entry] = []

    # ----------------------------------------------------------------------- axes and layout

    def area(self) -> tuple[float, float, float, float]:
        """The plot area ``(left, top, width, height)`` in points."""
        left, right, top, bottom = self.margins
        w, h = self.width - left - right, self.height - top - bottom
        if self.equal:
            ux, uy = w / (self.x.hi - self.x.lo), h / (self.y.hi - self.y.lo)
            if ux > uy:
                left, w = left + (w - uy * (self.x.hi - self.x.lo)) / 2, uy * (self.x.hi - self.x.lo)
            else:
                top, h = top + (h - ux * (self.y.hi - self.y.lo)) / 2, ux * (self.y.hi - self.y.lo)
        return left, top, w, h

    def px(self, x: float) -> float:
        left, _, w, _ = self.area()
        return left + w * self.x.unit(x)

    def py(self, y: float) -> float:
        _, top, _, h = self.area()
        return top + h * (1.0 - self.y.unit(y))

    # ----------------------------------------------------------------------------- marks

    @staticmethod
    def _stroke(colour: str, width: float, dash: str | None) -> str:
        s = f'fill="none" stroke="{escape(colour)}" stroke-width="{_f(width)}"'
        return s + (f' stroke-dasharray="{dash}"' if dash else "")

    @staticmethod
    def _tag(series: str | None) -> str:
        """The ``data-series`` attribute naming a mark's data (for readers and tests)."""
        return f' data-series="{escape(series)}"' if series else ""

    @staticmethod
    def _same_length(xs: Sequence[float], ys: Sequence[float], what: str = "y values") -> None:
        if len(xs) != len(ys):
            raise ValueError(f"{len(xs)} x values for {len(ys)} {what}")

    def _shown(self, x: float, y: float) -> bool:
        return self.x.shown(x) and self.y.shown(y)

    def _path(self, points: Sequence[tuple[float, float]]) -> str:
        """Path data through ``points``; a point without a place on the axes (NaN, infinite, not
        positive on a log axis) is left out and breaks the line there, as matplotlib does."""
        out, pen = [], "M"
        for x, y in points:
            if not self._shown(x, y):
                pen = "M"
                continue
            out.append(f"{pen}{_f(self.px(x))},{_f(self.py(y))}")
            pen = "L"
        return " ".join(out)

    def line(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        *,
        colour: str,
        width: float = 1.4,
        dash: str | None = None,
        steps: bool = False,
        marker_size: float | None = None,
        label: str | None = None,
        series: str | None = None,
    ) -> None:
        """A polyline through ``(xs, ys)``, with round markers of diameter ``marker_size``;
        ``steps``: a step curve holding each ``y`` from its ``x`` to the next (matplotlib's
        ``step(where="post")``)."""
        self._same_length(xs, ys)
        points: list[tuple[float, float]] = []
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if steps and i:
                points.append((x, ys[i - 1]))
            points.append((x, y))
        self._marks.append(
            f'<path{self._tag(series)} d="{self._path(points)}" {self._stroke(colour, width, dash)}/>'
        )
        if marker_size:
            self._markers(xs, ys, colour, marker_size, series)
        if label is not None:
            self._legend.append(
                _Entry(label, "line", {"colour": colour, "width": _f(width), "dash": dash or ""})
            )

    def _markers(
        self, xs: Sequence[float], ys: Sequence[float], colour: str, size: float, series: str | None
    ) -> None:
        dots = "".join(
            f'<circle cx="{_f(self.px(x))}" cy="{_f(self.py(y))}" r="{_f(size / 2)}"/>'
            for x, y in zip(xs, ys, strict=True)
            if self._shown(x, y)
        )
        self._marks.append(f'<g{self._tag(series)} fill="{escape(colour)}">{dots}</g>')

    def scatter(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        *,
        colour: str,
        size: float = 5.0,
        label: str | None = None,
        series: str | None = None,
    ) -> None:
        """Round markers of diameter ``size`` points."""
        self._same_length(xs, ys)
        self._markers(xs, ys, colour, size, series)
        if label is not None:
            self._legend.append(_Entry(label, "marker", {"colour": colour, "size": _f(size)}))

    def bars(
        self,
        xs: Sequence[float],
        heights: Sequence[float],
        *,
        bar_width: float,
        fill: str,
        edge: str,
        label: str | None = None,
        series: str | None = None,
    ) -> None:
        """Vertical bars centred on ``xs``, ``bar_width`` data units wide, from 0 to each height."""
        self._same_length(xs, heights, "heights")
        if self.y.log:
            raise ValueError("bars need a linear y axis (they start at 0)")
        rects = []
        for x, h in zip(xs, heights, strict=True):
            if not (math.isfinite(x) and math.isfinite(h)):
                continue
            x0, x1 = self.px(x - bar_width / 2), self.px(x + bar_width / 2)
            y0, y1 = self.py(max(h, 0.0)), self.py(min(h, 0.0))
            rects.append(f'<rect x="{_f(x0)}" y="{_f(y0)}" width="{_f(x1 - x0)}" height="{_f(y1 - y0)}"/>')
        self._marks.append(
            f'<g{self._tag(series)} fill="{escape(fill)}" stroke="{escape(edge)}" stroke-width="0.4">'
            f"{''.join(rects)}</g>"
        )
        if label is not None:
            self._legend.append(_Entry(label, "patch", {"fill": fill, "edge": edge}))

    def vline(
        self, x: float, *, colour: str, width: float = 1.2, dash: str | None = None, label: str | None = None
    ) -> None:
        """A vertical line across the plot area at ``x``."""
        self.line([x, x], [self.y.lo, self.y.hi], colour=colour, width=width, dash=dash, label=label)

    def hline(
        self, y: float, *, colour: str, width: float = 1.0, dash: str | None = None, label: str | None = None
    ) -> None:
        """A horizontal line across the plot area at ``y``."""
        self.line([self.x.lo, self.x.hi], [y, y], colour=colour, width=width, dash=dash, label=label)

    def text(
        self,
        x: float,
        y: float,
        s: str,
        *,
        dx: float = 0.0,
        dy: float = 0.0,
        anchor: str = "start",
        size: float | None = None,
    ) -> None:
        """``s`` at data point ``(x, y)`` moved by ``(dx, dy)`` points (``dy`` up), unclipped."""
        fs = self.font_size if size is None else size
        self._free.append(self._text(self.px(x) + dx, self.py(y) - dy, s, fs, anchor))

    @staticmethod
    def _text(x: float, y: float, s: str, size: float, anchor: str = "middle", rotate: bool = False) -> str:
        extra = f' transform="rotate(-90 {_f(x)} {_f(y)})"' if rotate else ""
        return f'<text x="{_f(x)}" y="{_f(y)}" font-size="{_f(size)}" text-anchor="{anchor}"{extra}>{escape(s)}</text>'

    def legend(self, loc: str = "upper left", *, columns: int = 1, size: float | None = None) -> None:
        """Show the labelled marks: ``"upper left"``, ``"upper right"`` (inside the plot area,
        on a white box) or ``"below"`` (under the x-axis title, in ``columns`` columns)."""
        if loc not in ("upper left", "upper right", "below"):
            raise ValueError(f"legend location must be 'upper left', 'upper right' or 'below', got {loc!r}")
        self._legend_loc, self._legend_columns, self._legend_size = loc, max(columns, 1), size

    # ----------------------------------------------------------------------------- output

    def _axes_svg(self) -> list[str]:
        left, top, w, h = self.area()
        fs = self.font_size
        out = ['<g stroke="#b0b0b0" stroke-opacity="0.3" stroke-width="0.8" fill="none">']
        xt = [(t, s) for t, s in self.x.tick_marks() if self.x.lo <= t <= self.x.hi]
        yt = [(t, s) for t, s in self.y.tick_marks() if self.y.lo <= t <= self.y.hi]
        out += [f'<path d="M{_f(self.px(t))},{_f(top)} V{_f(top + h)}"/>' for t, _ in xt]
        out += [f'<path d="M{_f(left)},{_f(self.py(t))} H{_f(left + w)}"/>' for t, _ in yt]
        out.append("</g>")
        out.append('<g stroke="#000000" stroke-width="0.8" fill="none">')
        out += [f'<path d="M{_f(self.px(t))},{_f(top + h)} v3.5"/>' for t, _ in xt]
        out += [f'<path d="M{_f(left)},{_f(self.py(t))} h-3.5"/>' for t, _ in yt]
        out.append(f'<rect x="{_f(left)}" y="{_f(top)}" width="{_f(w)}" height="{_f(h)}"/>')
        out.append("</g>")
        out += [self._text(self.px(t), top + h + 5.5 + fs, s, fs) for t, s in xt]
        out += [self._text(left - 5.5, self.py(t) + fs * 0.35, s, fs, "end") for t, s in yt]
        if self.x.title:
            out.append(self._text(left + w / 2, top + h + 9 + 2 * fs, self.x.title, fs))
        if self.y.title:
            widest = max((len(s) for _, s in yt), default=1)
            out.append(
                self._text(
                    left - 9 - widest * CHAR_WIDTH * fs - 0.4 * fs, top + h / 2, self.y.title, fs, rotate=True
                )
            )
        if self.title:
            out.append(self._text(left + w / 2, top - 0.7 * fs, self.title, fs * 1.2))
        return out

    def _legend_svg(self) -> list[str]:
        entries = self._legend
        if not entries or not hasattr(self, "_legend_loc"):
            return []
        fs = self._legend_size or self.font_size * 0.85
        left, top, w, h = self.area()
        sample, gap, pad, row = 2.0 * fs, 0.8 * fs, 0.5 * fs, 1.45 * fs
        widths = [sample + gap + len(e.label) * CHAR_WIDTH * fs for e in entries]
        if self._legend_loc == "below":
            cols = min(self._legend_columns, len(entries))
            col_w = max(widths) + 1.5 * fs
            box_w = cols * col_w
            x0 = left + (w - box_w) / 2
            y0 = top + h + 16 + 2.4 * self.font_size
            places = [(x0 + (i % cols) * col_w, y0 + (i // cols) * row) for i in range(len(entries))]
            out: list[str] = []
        else:
            box_w = max(widths) + 2 * pad
            box_h = len(entries) * row + pad
            x0 = left + 0.5 * fs if self._legend_loc == "upper left" else left + w - 0.5 * fs - box_w
            y0 = top + 0.5 * fs
            out = [
                f'<rect x="{_f(x0)}" y="{_f(y0)}" width="{_f(box_w)}" height="{_f(box_h)}" fill="#ffffff" '
                f'fill-opacity="0.9" stroke="#cccccc" stroke-width="0.8" rx="2"/>'
            ]
            places = [(x0 + pad, y0 + pad + i * row) for i in range(len(entries))]
        for e, (x, y) in zip(entries, places, strict=True):
            mid = y + 0.5 * row
            if e.kind == "line":
                dash = f' stroke-dasharray="{e.style["dash"]}"' if e.style["dash"] else ""
                out.append(
                    f'<path d="M{_f(x)},{_f(mid)} h{_f(sample)}" fill="none" stroke="{escape(e.style["colour"])}" '
                    f'stroke-width="{e.style["width"]}"{dash}/>'
                )
            elif e.kind == "marker":
                out.append(
                    f'<circle cx="{_f(x + sample / 2)}" cy="{_f(mid)}" r="{_f(float(e.style["size"]) / 2)}" '
                    f'fill="{escape(e.style["colour"])}"/>'
                )
            else:
                out.append(
                    f'<rect x="{_f(x)}" y="{_f(mid - 0.35 * fs)}" width="{_f(sample)}" height="{_f(0.7 * fs)}" '
                    f'fill="{escape(e.style["fill"])}" stroke="{escape(e.style["edge"])}" stroke-width="0.4"/>'
                )
            out.append(self._text(x + sample + gap, mid + 0.35 * fs, e.label, fs, "start"))
        return out

    def svg(self) -> str:
        """The figure as a bare ``<svg>`` element, for inlining in HTML."""
        left, top, w, h = self.area()
        clip = f"{self.prefix}-area"
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{_f(self.width)}pt" '
            f'height="{_f(self.height)}pt" viewBox="0 0 {_f(self.width)} {_f(self.height)}" '
            f'id="{escape(self.prefix)}" font-family="{FONT}" stroke-linejoin="round">',
            f'<defs><clipPath id="{clip}"><rect x="{_f(left)}" y="{_f(top)}" width="{_f(w)}" '
            f'height="{_f(h)}"/></clipPath></defs>',
            f'<rect width="{_f(self.width)}" height="{_f(self.height)}" fill="#ffffff"/>',
            *self._axes_svg(),
            f'<g clip-path="url(#{clip})">',
            *self._marks,
            "</g>",
            *self._free,
            *self._legend_svg(),
            "</svg>",
        ]
        return "\n".join(parts)
