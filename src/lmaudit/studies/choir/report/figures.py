"""The choir report's figures, each as inline SVG (or None when the data hold no point for it).

Width vs relative persona lift per question; unconditioned and same-persona RBO by width bin
with bootstrap bars and STC labels; recoverability by member and persona with chance lines and
the shuffle-null band; echo rate vs signal-to-chance and unconditioned vs same-persona RBO per
question; matched cue pairs. Every point is named by its question id, as written (figure text
is never TeX), on the side of the point that keeps it inside the axes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lmaudit.figures import svg_figure
from lmaudit.studies.choir.results import CuePair, NoveltyBin, QuestionResult, Recovery, WidthBin

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["bin_label", "bins_svg", "cue_pairs_svg", "recover_svg", "scatter_svg", "width_lift_svg"]

_SIZE = (5.4, 3.4)  # inches
_NEUTRAL = "#888"
RECOVER_LABELS = {"model": "model", "persona": "persona", "persona_within_model_loqo": "persona within model"}


def _axes_svg(draw: Callable[[Axes], object], prefix: str, size: tuple[float, float] = _SIZE) -> str:
    """One set of axes drawn by ``draw``, as inline SVG."""

    def on_figure(fig: Figure) -> None:
        draw(fig.add_subplot())

    return svg_figure(on_figure, size=size, prefix=prefix)


def _label_points(ax: Axes, pts: list[tuple[Any, Any, str]]) -> None:
    """Each point named by its question id: right of the point in the left half of the axes,
    left of it in the right half, so no name runs past the axes."""
    ax.margins(x=0.08, y=0.1)
    lo, hi = ax.get_xlim()
    mid = (lo + hi) / 2
    for x, y, q in pts:
        right = x > mid
        ax.annotate(
            q,
            (x, y),
            textcoords="offset points",
            xytext=(-4 if right else 4, 3),
            ha="right" if right else "left",
            fontsize=6.5,
            color="#444",
        )


def bin_label(b: WidthBin | NoveltyBin) -> str:
    return f"[{b.lo:g}, {'∞' if b.hi is None else format(b.hi, 'g')})"


def width_lift_svg(qs: Mapping[str, QuestionResult]) -> str | None:
    pts = [
        (v.width, v.relative_lift, q)
        for q, v in qs.items()
        if v.width is not None and v.relative_lift is not None
    ]
    if not pts:
        return None

    def draw(ax: Axes) -> None:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, color="#2e7d6f", label="question")
        ax.axhline(
            1.0, color=_NEUTRAL, linestyle=":", linewidth=1, label="lift = 1 (persona changes nothing)"
        )
        _label_points(ax, pts)
        ax.set_xlabel("prompt width W_q")
        ax.set_ylabel("relative persona lift")
        ax.legend(fontsize=7)

    return _axes_svg(draw, "choir-wl")


def bins_svg(bins: Sequence[WidthBin]) -> str | None:
    rows = [b for b in bins if b.n]
    if not rows:
        return None

    def draw(ax: Axes) -> None:
        for k, (key, label, color, marker) in enumerate(
            (
                ("unconditioned_rbo", "unconditioned RBO", "#c2185b", "o"),
                ("same_persona_rbo", "same-persona RBO", "#00897b", "s"),
            )
        ):
            ys, xs, errs = [], [], []
            for i, b in enumerate(rows):
                m = getattr(b, key)
                if m:
                    xs.append(i + (k - 0.5) * 0.15)
                    ys.append(m.mean)
                    errs.append([m.mean - m.ci.lo, m.ci.hi - m.mean])
            if xs:
                ax.errorbar(
                    xs,
                    ys,
                    yerr=list(zip(*errs, strict=True)),
                    fmt=marker,
                    color=color,
                    label=label,
                    capsize=3,
                )
        for i, b in enumerate(rows):
            if b.stc:
                ax.annotate(  # at the bottom of the axes, whatever the RBO range
                    f"STC {b.stc.mean:.2f}",
                    (i, 0.0),
                    xycoords=("data", "axes fraction"),
                    textcoords="offset points",
                    xytext=(0, 4),
                    ha="center",
                    fontsize=7,
                )
        lo, hi = ax.get_ylim()  # room under the points for the STC labels
        ax.set_ylim(lo - 0.18 * (hi - lo), hi)
        ax.set_xticks(range(len(rows)), [bin_label(b) for b in rows])
        ax.set_xlim(-0.5, len(rows) - 0.5)
        ax.set_xlabel("width bin")
        ax.set_ylabel("mean cross-model RBO")
        ax.legend(fontsize=7)

    return _axes_svg(draw, "choir-bins")


def recover_svg(rec: Mapping[str, Recovery]) -> str | None:
    names = [k for k in RECOVER_LABELS if k in rec]
    if not names:
        return None

    def draw(fig: Figure) -> None:
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        ax = fig.add_subplot()
        for i, k in enumerate(names):
            r = rec[k]
            band = r.null_interval
            if band is not None:
                ax.fill_between(
                    [i - 0.3, i + 0.3],
                    band.lo,
                    band.hi,
                    color="#ffab91",
                    alpha=0.5,
                    zorder=1,
                )
            ax.bar(i, r.accuracy, color="#5c6bc0", width=0.45, alpha=0.85, zorder=2)
            if (ci := r.interval) is not None:
                ax.errorbar(
                    i,
                    r.accuracy,
                    yerr=[[r.accuracy - ci.lo], [ci.hi - r.accuracy]],
                    color="k",
                    capsize=3,
                    zorder=3,
                )
            ax.hlines(r.chance, i - 0.38, i + 0.38, colors="#333", linestyles=":", linewidth=1.5, zorder=4)
        ax.set_xticks(range(len(names)), [RECOVER_LABELS[n] for n in names])
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("nearest-centroid accuracy")
        handles = [
            Patch(color="#5c6bc0", label="accuracy (bar: 95% bootstrap CI)"),
            Line2D([], [], color="#333", linestyle=":", linewidth=1.5, label="chance (1 / classes)"),
            Patch(color="#ffab91", alpha=0.5, label="shuffle-null 95% band"),
        ]
        fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=3)

    return svg_figure(draw, size=(_SIZE[0], _SIZE[1] + 0.3), prefix="choir-rec")


def scatter_svg(
    qs: Mapping[str, QuestionResult], x: str, y: str, xl: str, yl: str, prefix: str
) -> str | None:
    """One point per question: ``x`` against ``y`` (``stc``: the signal-to-chance ratio). With
    ``x == "R_q"`` the dotted diagonal is y = x; with ``y == "stc"`` the dotted line is chance."""

    def val(v: QuestionResult, k: str) -> Any:
        return v.stc_ratio if k == "stc" else getattr(v, k)

    pts = [(val(v, x), val(v, y), q) for q, v in qs.items()]
    pts = [p for p in pts if p[0] is not None and p[1] is not None]
    if not pts:
        return None

    def draw(ax: Axes) -> None:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, color="#6d4c41", label="question")
        if x == "R_q":
            hi = max(max(p[0], p[1]) for p in pts) * 1.05
            ax.plot(
                [0, hi],
                [0, hi],
                color=_NEUTRAL,
                linestyle=":",
                linewidth=1,
                label="y = x (no persona effect)",
            )
        if y == "stc":
            ax.axhline(1.0, color=_NEUTRAL, linestyle=":", linewidth=1, label="STC = 1 (chance)")
        _label_points(ax, pts)
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        ax.legend(fontsize=7)

    return _axes_svg(draw, prefix)


def cue_pairs_svg(pairs: Sequence[CuePair]) -> str | None:
    """Echo vs signal-to-chance for matched cue pairs (arrow: original to stripped)."""
    # (name, original's echo and STC, stripped prompt's echo and STC)
    pts = [
        (p.original, (be, bs), (ae, as_))
        for p in pairs
        if (be := p.before.item_echo) is not None
        and (bs := p.before.stc) is not None
        and (ae := p.after.item_echo) is not None
        and (as_ := p.after.stc) is not None
    ]
    if not pts:
        return None

    def draw(ax: Axes) -> None:
        for n, (_, b, a) in enumerate(pts):
            ax.annotate("", xy=a, xytext=b, arrowprops={"arrowstyle": "->", "color": _NEUTRAL})
            ax.scatter([b[0]], [b[1]], s=16, color="#c2185b", label="original" if not n else None)
            ax.scatter(
                [a[0]],
                [a[1]],
                s=16,
                color="#00796b",
                marker="s",
                label="stripped" if not n else None,
            )
        ax.axhline(1.0, color=_NEUTRAL, linestyle=":", linewidth=1, label="STC = 1 (chance)")
        _label_points(ax, [(b[0], b[1], name) for name, b, _ in pts])
        ax.set_xlabel("item-level anchor echo")
        ax.set_ylabel("signal-to-chance")
        ax.legend(fontsize=7)

    return _axes_svg(draw, "choir-cues")
