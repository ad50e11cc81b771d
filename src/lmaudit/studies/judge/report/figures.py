"""The judge report's figures as inline SVG (matplotlib, through :func:`lmaudit.figures.svg_figure`):
:func:`disagreement_svg`, each comparison's disagreement rate with its exact interval,
:func:`confidence_svg`, the self-reported confidence histograms, one row per condition, and
:func:`order_swap_svg`, the first-position win rates of pairs judged in both orders."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lmaudit.figures import svg_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from lmaudit.studies.judge.report.order_swap import TableRow
    from lmaudit.studies.judge.sections import Comparison, ExactInterval

__all__ = ["BINS", "confidence_counts", "confidence_svg", "disagreement_svg", "order_swap_svg"]

BINS = 10


def confidence_counts(values: Sequence[float]) -> list[int]:
    """Counts in ``BINS`` equal bins over [0, 1]: ``[b/10, (b+1)/10)``, the last one closed;
    values outside [0, 1] count in the end bins."""
    counts = [0] * BINS
    for v in values:
        counts[min(BINS - 1, max(0, int(float(v) * BINS)))] += 1
    return counts


def confidence_svg(values_by_condition: Mapping[str, Sequence[float]]) -> str:
    """Histograms of self-reported confidence, one row per condition; ``""`` without values."""
    conds = [c for c, v in values_by_condition.items() if v]
    if not conds:
        return ""
    centres = [(b + 0.5) / BINS for b in range(BINS)]

    def draw(fig: Figure) -> None:
        axes = fig.subplots(len(conds), 1, sharex=True, squeeze=False)[:, 0]
        for ax, cid in zip(axes, conds, strict=True):
            vals = values_by_condition[cid]
            counts = confidence_counts(vals)
            bars = ax.bar(centres, counts, width=0.85 / BINS, color="#4a7ab5")
            ax.bar_label(bars, labels=[str(n) if n else "" for n in counts], fontsize=7)
            ax.set_ylim(0, 1.3 * max(counts))
            ax.set_yticks([])
            ax.set_ylabel(f"{cid}\nn={len(vals)}", rotation=0, ha="right", va="center")
        axes[-1].set_xlim(0.0, 1.0)
        axes[-1].set_xticks([b / BINS for b in range(0, BINS + 1, 2)])
        axes[-1].set_xlabel("self-reported confidence")

    return svg_figure(draw, size=(4.8, 0.75 * len(conds) + 0.6), prefix="judge-conf")


def _interval(ax: Any, y: float, ci: ExactInterval, rate: float | None, colour: str, size: float) -> None:
    """A rate (dot) and its interval (bar) on row ``y``."""
    ax.plot([ci.low, ci.high], [y, y], color=colour, linewidth=2.2, alpha=0.55)
    ax.plot([rate], [y], "o", color=colour, markersize=size)


def _count_label(ax: Any, y: float, text: str) -> None:
    """The counts behind a row, right of the axes."""
    ax.annotate(
        text,
        (1.0, y),
        xytext=(6, 0),
        textcoords="offset points",
        va="center",
        fontsize=8,
        annotation_clip=False,
    )


def _share_axes(ax: Any, ys: list[int], labels: list[str], xlabel: str) -> None:
    """One row per label, shares 0-100% across."""
    ax.set_yticks(ys, labels)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(-0.6, len(ys) - 0.4)
    ax.set_xticks([0.0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    ax.set_xlabel(xlabel)


def disagreement_svg(comparisons: Sequence[Comparison], alpha: float) -> str:
    """Each comparison's share of changed verdicts (dot) and its exact ``1 - alpha`` interval
    (bar), one row each, the repeat baseline grey and its rate a dashed line; ``""`` when no
    comparison has a pair."""
    rows = [d for d in comparisons if d.n]
    if not rows:
        return ""

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        ys = list(range(len(rows)))[::-1]
        for y, d in zip(ys, rows, strict=True):
            base = d.is_repeat
            colour = "#777777" if base else "#c62828"
            _interval(ax, y, d.ci, d.rate, colour, 6)
            _count_label(ax, y, f"{d.changed}/{d.n}")
            if base and d.rate is not None:
                ax.axvline(d.rate, color="#777777", linestyle="--", linewidth=0.9)
        _share_axes(
            ax,
            ys,
            [d.comparison for d in rows],
            f"share of paired verdicts that changed (dot), exact {100 * (1 - alpha):g}% interval (bar)",
        )

    return svg_figure(draw, size=(6.4, 0.42 * len(rows) + 0.9), prefix="judge-dis")


def order_swap_svg(rows: Sequence[TableRow], alpha: float) -> str:
    """Per group of pairs (rows of :func:`.order_swap_report.table`), the first-position win
    rate among the pairs that flipped (red) and among all decisive verdicts (grey), each with
    its exact ``1 - alpha`` interval, against the dashed line of no position bias (50%);
    ``""`` when no row has a decisive verdict."""
    rows = [r for r in rows if r.block.per_verdict.n or r.block.flipped.n]
    if not rows:
        return ""

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        ys = list(range(len(rows)))[::-1]
        ax.axvline(0.5, color="#444444", linestyle="--", linewidth=0.9)
        for y, r in zip(ys, rows, strict=True):
            f, v = r.block.flipped, r.block.per_verdict
            readings = ((f.n, f.ci, f.rate, "#c62828", 0.13), (v.n, v.ci, v.rate, "#777777", -0.13))
            for n, ci, rate, colour, dy in readings:
                if n:
                    _interval(ax, y + dy, ci, rate, colour, 5)
            _count_label(ax, y, f"{f.first_both}/{f.n} · {v.first}/{v.n}")
        _share_axes(
            ax,
            ys,
            [f"{r.group}: {r.name}" if r.group != "overall" else "all pairs" for r in rows],
            "first-position wins: flipped pairs (red), all decisive verdicts (grey); "
            f"exact {100 * (1 - alpha):g}% intervals",
        )

    return svg_figure(draw, size=(6.4, 0.45 * len(rows) + 0.9), prefix="judge-order")
