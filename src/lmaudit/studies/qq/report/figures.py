"""The QQ report's figures as inline SVG strings (matplotlib, through :func:`lmaudit.figures.svg_figure`).

* :func:`saturation_cdf_svg` (seed Figure 1): empirical CDF of the distance from determinism
  ``d = 1 - max(p, 1 - p)`` over every measured position, log x-axis from half the smallest
  distance (or the threshold), one curve per stratum group (A/B-labelled items, Yes/No items) plus all
  positions, and the saturation threshold.
* :func:`label_effect_svg` (seed Figure 2): per-item ``q`` under two label mappings with the
  dashed diagonal of mapping-invariance, on equal axes symmetric about 0 that fit the data;
  items deviating by more than ``annotate_above`` are labelled.

Both take the typed results (:class:`~lmaudit.studies.qq.results.QQResults`) and return
``None`` when there is nothing to draw. Text in the SVG is XML-escaped by matplotlib and never parsed as mathtext,
so any item id is safe to inline.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lmaudit.figures import svg_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from lmaudit.studies.qq.results import PositionEstimate, QQResults

__all__ = [
    "D_CLIP",
    "YESNO_MAPPING",
    "iter_positions",
    "label_effect_points",
    "label_effect_svg",
    "mapping_pair",
    "position_distances",
    "saturation_cdf_svg",
]

D_CLIP = 1e-14  # d = 0 is drawn here on the log axis
YESNO_MAPPING = "yesno"
GROUP_AB, GROUP_YN = "A/B items", "Yes/No items"

_COLOURS = {GROUP_AB: "#1f77b4", GROUP_YN: "#d62728", "all": "#333333"}


def iter_positions(results: QQResults) -> Iterator[tuple[str, PositionEstimate]]:
    """``(mapping name, position)`` for every measured position of every item."""
    for _, m, _, pos in results.positions():
        yield m.mapping, pos


def position_distances(results: QQResults) -> dict[str, list[float]]:
    """Distance from determinism per stratum group: Yes/No mapping vs A/B-labelled mappings."""
    out: dict[str, list[float]] = {GROUP_AB: [], GROUP_YN: []}
    for mapping, pos in iter_positions(results):
        if math.isfinite(pos.d):
            out[GROUP_YN if mapping == YESNO_MAPPING else GROUP_AB].append(pos.d)
    return out


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _decade(x: float, _pos: float | None = None) -> str:
    """Plain-text log tick label ``10⁻ⁿ`` (mathtext is off in the reports' style)."""
    if x <= 0:
        return ""
    e = round(math.log10(x))
    return "1" if e == 0 else "10" + str(e).translate(_SUPERSCRIPT)


def _share_below(d: Sequence[float], cut: float) -> float:
    return float(np.mean(np.asarray(d) < cut)) if len(d) else float("nan")


def cdf_left(smallest: float, cut: float | None) -> float:
    """The x-axis start: half the smallest distance (or threshold) shown, so no decade is empty."""
    left = max(smallest, D_CLIP) if cut is None or cut <= 0 else min(max(smallest, D_CLIP), cut)
    return left / 2


def cdf_step(ax: Any, d: Sequence[float], lo: float, cut: float | None, label: str, **style: Any) -> None:
    """One distance-from-determinism CDF on ``ax`` (d = 0 at :data:`D_CLIP`), its label with
    the share below ``cut``."""
    x = np.sort(np.maximum(np.asarray(d, dtype=np.float64), D_CLIP))
    y = np.arange(1, x.size + 1) / x.size
    if cut is not None:
        label += f": {100 * _share_below(d, cut):.1f}% with d < {cut:.3g}"
    ax.step(np.concatenate([[lo], x]), np.concatenate([[0.0], y]), where="post", label=label, **style)


def cdf_axes(ax: Any, lo: float, cut: float | None, threshold: float | None, xlabel: str, title: str) -> None:
    """The saturation threshold's line, the log distance axis and the share axis."""
    if cut is not None and cut > 0:
        ax.axvline(cut, color="#888888", ls=":", lw=1.2, label=f"saturation threshold d = 1 − {threshold:g}")
    ax.set_xscale("log")
    ax.set_xlim(lo, 1.0)
    ax.xaxis.set_major_formatter(_decade)
    ax.tick_params(axis="x", which="minor", labelbottom=False)
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of positions with distance ≤ d")
    ax.set_title(title)


def saturation_cdf_svg(results: QQResults) -> str | None:
    """Seed Figure 1; ``None`` when no position has a finite ``p``."""
    groups = {k: v for k, v in position_distances(results).items() if v}
    if not groups:
        return None
    threshold = results.saturation.threshold
    cut = 1.0 - threshold
    curves: list[tuple[str, list[float]]] = list(groups.items())
    if len(groups) > 1:
        curves.append(("all", [d for v in groups.values() for d in v]))
    smallest = min(min(v) for v in groups.values())
    lo = cdf_left(smallest, cut)
    clipped = f"   (d = 0 drawn at {D_CLIP:g})" if smallest < D_CLIP else ""

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        for name, d in curves:
            label = f"{name} (n={len(d)})" + ("" if len(groups) > 1 else " = all positions")
            all_ = name == "all"
            cdf_step(
                ax,
                d,
                lo,
                cut,
                label,
                color=_COLOURS.get(name, "#555555"),
                lw=2.2 if all_ else 1.4,
                ls="--" if all_ else "-",
            )
        cdf_axes(
            ax,
            lo,
            cut,
            threshold,
            f"distance from determinism d = 1 − max(p, 1 − p){clipped}",
            "Figure 1. Saturation: CDF of distance from determinism",
        )
        # below the axes: a curve of saturated positions climbs at the left, where a legend inside would sit
        fig.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)

    return svg_figure(draw, size=(6.6, 4.3), prefix="fig1")


def mapping_pair(results: QQResults) -> tuple[str, str] | None:
    """The two A/B label mappings to compare (``map1``, ``map2`` when present), or ``None``."""
    names: set[str] = set()
    for item in results.items:
        own = {m.mapping for m in item.mappings} - {YESNO_MAPPING}
        if len(own) >= 2:
            names |= own
    if {"map1", "map2"} <= names:
        return ("map1", "map2")
    ordered = sorted(names)
    return (ordered[0], ordered[1]) if len(ordered) >= 2 else None


def label_effect_points(results: QQResults) -> list[dict[str, Any]]:
    """Per item measured under both mappings of :func:`mapping_pair`: ``q`` and OSS of each.

    Rows: ``item, q1, q2, delta_q, oss1, oss2, delta_oss`` (``|Δ|`` of mapping 2 vs 1).
    """
    pair = mapping_pair(results)
    if pair is None:
        return []
    rows: list[dict[str, Any]] = []
    for item in results.items:
        by = {m.mapping: m for m in item.mappings}
        if pair[0] not in by or pair[1] not in by:
            continue
        m1, m2 = by[pair[0]], by[pair[1]]
        rows.append(
            {
                "item": item.item,
                "q1": m1.q,
                "q2": m2.q,
                "delta_q": abs(m2.q - m1.q),
                "oss1": m1.oss,
                "oss2": m2.oss,
                "delta_oss": abs(m2.oss - m1.oss),
            }
        )
    return rows


def label_effect_svg(results: QQResults, annotate_above: float = 0.3) -> str | None:
    """Seed Figure 2; ``None`` when fewer than two A/B mappings were measured for any item."""
    pair = mapping_pair(results)
    pts = label_effect_points(results)
    if pair is None or not pts:
        return None
    x = np.array([r["q1"] for r in pts])
    y = np.array([r["q2"] for r in pts])
    far = np.abs(y - x) > annotate_above
    # both axes [-lim, lim]: the largest |q| and a 10% margin, at least +-0.01 (a q of exactly 0)
    lim = max(1.1 * float(np.max(np.abs(np.concatenate([x, y])))), 0.01)

    from matplotlib.ticker import MaxNLocator

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        ax.plot([-lim, lim], [-lim, lim], ls="--", color="#888888", lw=1.0, label="q equal under both")
        ax.scatter(x[~far], y[~far], s=22, color="#1f77b4", zorder=3, label=f"|Δq| ≤ {annotate_above:g}")
        if far.any():
            ax.scatter(x[far], y[far], s=30, color="#d62728", zorder=3, label=f"|Δq| > {annotate_above:g}")
        for r, flag in zip(pts, far, strict=True):
            if flag:  # text kept inside the axes: left of points near the right edge, below near the top
                right = r["q1"] > 0.55 * lim
                ax.annotate(
                    r["item"],
                    (r["q1"], r["q2"]),
                    xytext=(-5 if right else 5, -11 if r["q2"] > 0.8 * lim else 5),
                    textcoords="offset points",
                    ha="right" if right else "left",
                    fontsize=7.5,
                    annotation_clip=False,
                )
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        for axis in (ax.xaxis, ax.yaxis):  # few enough ticks that their labels never run together
            axis.set_major_locator(
                MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10], symmetric=True, min_n_ticks=5)
            )
        ax.set_aspect("equal")
        ax.set_xlabel(f"q under {pair[0]}")
        ax.set_ylabel(f"q under {pair[1]}")
        ax.set_title(f"Figure 2. Label effect ({len(pts)} A/B items)")
        fig.legend(loc="outside lower center", ncol=3, fontsize=7.5, frameon=False)

    return svg_figure(draw, size=(4.8, 5.2), prefix="fig2")
