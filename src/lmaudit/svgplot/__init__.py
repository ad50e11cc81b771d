"""Small, deterministic SVG plots for the HTML reports, drawn without a plotting library.

One :class:`Plot` is one set of axes on a canvas sized in points (as matplotlib sizes its SVG:
``width="..pt"``), with linear or base-10 log axes, ticks, a light grid, step curves, lines,
markers, bars, reference lines, text and a legend. Text stays text (XML-escaped, never parsed
as markup), every element id carries the figure's ``prefix`` (several figures share one page),
and the output depends on the data only: the same data give the same bytes.

Importing matplotlib costs 0.5-0.75 s, more than the rest of a QQ report; the QQ and draws
reports draw their figures here. Layout is computed, not measured: text widths are estimated
at :data:`CHAR_WIDTH` of the font size per character (DejaVu Sans averages 0.55-0.6 for
labels like these), which only decides legend box sizes.
"""

from lmaudit.svgplot.plot import CHAR_WIDTH, Plot
from lmaudit.svgplot.scales import Axis, decade_label, linear_ticks, log_ticks, number_label

__all__ = ["CHAR_WIDTH", "Axis", "Plot", "decade_label", "linear_ticks", "log_ticks", "number_label"]
