"""The draws report's figures as inline SVG (:mod:`lmaudit.svgplot`, text kept as text).

* :func:`null_svg`: per family, the permutation null distribution of ``T`` (bars: share of
  the ``B`` permutations at each value) with the observed ``T`` and the ``1 - alpha``
  critical value;
* :func:`rho_curve_svg`: per family, the share of synthetic datasets with ``T_sim <= T`` by
  ``rho``, with the ``alpha`` line that defines ``rho_upper``.

Both take one family's results dict and return ``None`` when there is nothing to draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lmaudit.svgplot import Axis, Plot

__all__ = ["null_svg", "rho_curve_svg"]

_SIZE = (374.4, 208.8)  # points (5.2 x 2.9 in)
_MARGINS = (52.0, 10.0, 10.0, 36.0)


def _padded(lo: float, hi: float, share: float = 0.05) -> tuple[float, float]:
    """``[lo, hi]`` widened by ``share`` of its span on each side (a point: by 0.5)."""
    span = hi - lo
    return (lo - 0.5, hi + 0.5) if span <= 0 else (lo - share * span, hi + share * span)


def null_svg(family: Mapping[str, Any], prefix: str) -> str | None:
    null = family.get("null") or {}
    t, c = np.asarray(null.get("T") or [], dtype=float), np.asarray(null.get("count") or [], dtype=float)
    if t.size == 0 or t.size != c.size or not np.isfinite(c).all() or c.sum() <= 0:
        return None
    width = float(np.min(np.diff(t))) * 0.9 if t.size > 1 else 0.5
    share = c / c.sum()
    obs = float(family["T"])
    crit = family.get("critical_value")
    marks: Sequence[float] = [obs] + ([float(crit)] if isinstance(crit, int | float) else [])
    fig = Plot(*_SIZE, prefix, margins=_MARGINS)
    fig.x = Axis(
        *_padded(min(float(t.min()) - width / 2, *marks), max(float(t.max()) + width / 2, *marks)),
        title="T = Σ (R − E₀)",
    )
    fig.y = Axis(0.0, float(share.max()) * 1.05 if share.max() > 0 else 1.0, title="share of permutations")
    fig.bars(
        t.tolist(),
        share.tolist(),
        bar_width=width,
        fill="#9bb7d4",
        edge="#4a6f96",
        label=f"permutation null (B = {int(c.sum())})",
        series="null",
    )
    fig.vline(obs, colour="#c62828", width=1.6, label=f"observed T = {obs:.2f}")
    if isinstance(crit, int | float):
        fig.vline(
            float(crit),
            colour="#555555",
            width=1.0,
            dash="3.7,1.6",
            label=f"95th percentile = {float(crit):.2f}",
        )
    fig.legend("upper left", size=7.5)
    return fig.svg()


def rho_curve_svg(family: Mapping[str, Any], alpha: float, prefix: str) -> str | None:
    curve = family.get("rho_curve") or {}
    rho, share = curve.get("rho") or [], curve.get("share_le") or []
    if not rho:
        return None
    up = family.get("rho_upper")
    fig = Plot(*_SIZE, prefix, margins=(_MARGINS[0], _MARGINS[1], 22.0, _MARGINS[3]))
    xs = [float(r) for r in rho] + ([float(up)] if isinstance(up, int | float) else [])
    fig.x = Axis(*_padded(min(xs), max(xs)), title="ρ (persistence)")
    fig.y = Axis(-0.02, 1.02, ticks=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0], title="share")
    fig.title = f"ρ_upper: {family.get('rho_upper_label', '—')}"
    fig.line(
        [float(r) for r in rho],
        [float(v) for v in share],
        colour="#1f5f99",
        width=1.2,
        marker_size=2.6,
        label="share of simulated T ≤ observed T",
        series="share_le",
    )
    fig.hline(alpha, colour="#c62828", dash="3.7,1.6", label=f"α = {alpha:g}")
    if isinstance(up, int | float):
        fig.vline(float(up), colour="#2e7d32", width=1.2, label=f"ρ_upper = {float(up):.2f}")
    fig.legend("upper right", size=7.5)
    return fig.svg()
