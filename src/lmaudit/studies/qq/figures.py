"""The QQ report's figures as inline SVG strings (:mod:`lmaudit.svgplot`, text kept as text).

* :func:`saturation_cdf_svg` (seed Figure 1): empirical CDF of the distance from determinism
  ``d = 1 - max(p, 1 - p)`` over every measured position, log x-axis, one curve per stratum
  group (A/B-labelled items, Yes/No items) plus all positions, and the saturation threshold.
* :func:`label_effect_svg` (seed Figure 2): per-item ``q`` under two label mappings with the
  dashed diagonal of mapping-invariance; items deviating by more than ``annotate_above`` are
  labelled.

Both take the results dict of ``QQResult.to_json()`` and return ``None`` when there is
nothing to draw. Text in the SVG is XML-escaped and never parsed as markup, so any item id
is safe to inline.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from lmaudit.svgplot import Axis, Plot

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


def _num(x: Any) -> float | None:
    """``x`` as a finite float, else ``None``."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def iter_positions(results: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(mapping name, position dict)`` for every measured position of every item."""
    for item in results.get("items") or []:
        for m in item.get("mappings") or []:
            for cell in m.get("cells") or []:
                for pos in cell.get("positions") or []:
                    yield str(m.get("mapping", "")), pos


def position_distances(results: Mapping[str, Any]) -> dict[str, list[float]]:
    """Distance from determinism per stratum group: Yes/No mapping vs A/B-labelled mappings."""
    out: dict[str, list[float]] = {GROUP_AB: [], GROUP_YN: []}
    for mapping, pos in iter_positions(results):
        d = _num(pos.get("d"))
        if d is None:
            p = _num(pos.get("p"))
            d = None if p is None else 1.0 - max(p, 1.0 - p)
        if d is not None:
            out[GROUP_YN if mapping == YESNO_MAPPING else GROUP_AB].append(d)
    return out


def _share_below(d: Sequence[float], cut: float) -> float:
    return float(np.mean(np.asarray(d) < cut)) if len(d) else float("nan")


def saturation_cdf_svg(results: Mapping[str, Any]) -> str | None:
    """Seed Figure 1; ``None`` when no position has a finite ``p``."""
    groups = {k: v for k, v in position_distances(results).items() if v}
    if not groups:
        return None
    threshold = _num((results.get("saturation") or {}).get("threshold"))
    if threshold is None:
        threshold = _num((results.get("params") or {}).get("saturation_threshold"))
    cut = None if threshold is None else 1.0 - threshold
    curves: list[tuple[str, list[float]]] = list(groups.items())
    if len(groups) > 1:
        curves.append(("all", [d for v in groups.values() for d in v]))
    fig = Plot(475.2, 266.4, "fig1", margins=(47.5, 9.5, 24.0, 40.0))
    fig.x = Axis(
        D_CLIP / 10,
        1.0,
        log=True,
        title=f"distance from determinism d = 1 − max(p, 1 − p)   (d = 0 drawn at {D_CLIP:g})",
    )
    fig.y = Axis(
        0.0, 1.02, ticks=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0], title="share of positions with distance ≤ d"
    )
    fig.title = "Figure 1. Saturation: CDF of distance from determinism"
    for name, d in curves:
        x = np.sort(np.maximum(np.asarray(d, dtype=np.float64), D_CLIP))
        y = np.arange(1, x.size + 1) / x.size
        label = f"{name} (n={x.size})" + ("" if len(groups) > 1 else " = all positions")
        if cut is not None:
            label += f": {100 * _share_below(d, cut):.1f}% with d < {cut:.3g}"
        fig.line(
            [D_CLIP / 10, *x.tolist()],
            [0.0, *y.tolist()],
            colour=_COLOURS.get(name, "#555555"),
            width=2.2 if name == "all" else 1.4,
            dash="5.5,2.4" if name == "all" else None,
            steps=True,
            label=label,
            series=name,
        )
    if cut is not None and cut > 0:
        fig.vline(cut, colour="#888888", dash="1.2,2", label=f"saturation threshold d = 1 − {threshold:g}")
    fig.legend("upper left", size=8.0)
    return fig.svg()


def mapping_pair(results: Mapping[str, Any]) -> tuple[str, str] | None:
    """The two A/B label mappings to compare (``map1``, ``map2`` when present), or ``None``."""
    names: set[str] = set()
    for item in results.get("items") or []:
        own = {str(m.get("mapping")) for m in item.get("mappings") or []} - {YESNO_MAPPING}
        if len(own) >= 2:
            names |= own
    if {"map1", "map2"} <= names:
        return ("map1", "map2")
    ordered = sorted(names)
    return (ordered[0], ordered[1]) if len(ordered) >= 2 else None


def label_effect_points(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per item measured under both mappings of :func:`mapping_pair`: ``q`` and OSS of each.

    Rows: ``item, q1, q2, delta_q, oss1, oss2, delta_oss`` (``|Δ|`` of mapping 2 vs 1).
    """
    pair = mapping_pair(results)
    if pair is None:
        return []
    rows: list[dict[str, Any]] = []
    for item in results.get("items") or []:
        by = {str(m.get("mapping")): m for m in item.get("mappings") or []}
        if pair[0] not in by or pair[1] not in by:
            continue
        q1, q2 = _num(by[pair[0]].get("q")), _num(by[pair[1]].get("q"))
        o1, o2 = _num(by[pair[0]].get("oss")), _num(by[pair[1]].get("oss"))
        rows.append(
            {
                "item": str(item.get("item", "")),
                "q1": q1,
                "q2": q2,
                "delta_q": None if q1 is None or q2 is None else abs(q2 - q1),
                "oss1": o1,
                "oss2": o2,
                "delta_oss": None if o1 is None or o2 is None else abs(o2 - o1),
            }
        )
    return rows


def label_effect_svg(results: Mapping[str, Any], annotate_above: float = 0.3) -> str | None:
    """Seed Figure 2; ``None`` when fewer than two A/B mappings were measured for any item."""
    pair = mapping_pair(results)
    pts = [r for r in label_effect_points(results) if r["q1"] is not None and r["q2"] is not None]
    if pair is None or not pts:
        return None
    fig = Plot(345.6, 374.4, "fig2", margins=(48.4, 10.4, 22.5, 63.6))
    ticks = [-1.0, -0.5, 0.0, 0.5, 1.0]
    fig.x = Axis(-1.05, 1.05, ticks=ticks, title=f"q under {pair[0]}")
    fig.y = Axis(-1.05, 1.05, ticks=ticks, title=f"q under {pair[1]}")
    fig.equal = True
    fig.title = f"Figure 2. Label effect ({len(pts)} A/B items)"
    fig.line(
        [-1.05, 1.05], [-1.05, 1.05], colour="#888888", width=1.0, dash="3.7,1.6", label="q equal under both"
    )
    x = np.array([r["q1"] for r in pts])
    y = np.array([r["q2"] for r in pts])
    far = np.abs(y - x) > annotate_above
    fig.scatter(
        x[~far].tolist(),
        y[~far].tolist(),
        colour="#1f77b4",
        size=4.7,
        label=f"|Δq| ≤ {annotate_above:g}",
        series="near",
    )
    if far.any():
        fig.scatter(
            x[far].tolist(),
            y[far].tolist(),
            colour="#d62728",
            size=5.5,
            label=f"|Δq| > {annotate_above:g}",
            series="far",
        )
    for r, flag in zip(pts, far, strict=True):
        if flag:  # text kept inside the axes: left of points near the right edge, below near the top
            right = r["q1"] > 0.6
            fig.text(
                r["q1"],
                r["q2"],
                r["item"],
                dx=-5 if right else 5,
                dy=-11 if r["q2"] > 0.85 else 5,
                anchor="end" if right else "start",
                size=7.5,
            )
    fig.legend("below", columns=3, size=7.5)
    return fig.svg()
