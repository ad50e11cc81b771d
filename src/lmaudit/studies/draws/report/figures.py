"""The draws report's figures as inline SVG (matplotlib, through :func:`lmaudit.figures.svg_figure`).

* :func:`null_svg`: per family, the permutation null distribution of ``T`` (bars: share of
  the ``B`` permutations at each value) with the observed ``T`` and the ``1 - alpha``
  critical value;
* :func:`rho_curve_svg`: per family, the share of synthetic datasets with ``T_sim <= T`` by
  ``rho``, with the ``alpha`` line that defines ``rho_upper``.

Both take one family's results dict and return ``None`` when there is nothing to draw.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from lmaudit.figures import svg_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["null_svg", "rho_curve_svg"]

_SIZE = (5.2, 2.9)  # inches


def null_svg(family: Mapping[str, Any], prefix: str) -> str | None:
    null = family.get("null") or {}
    t, c = np.asarray(null.get("T") or [], dtype=float), np.asarray(null.get("count") or [], dtype=float)
    if t.size == 0 or t.size != c.size or not np.isfinite(c).all() or c.sum() <= 0:
        return None
    width = float(np.min(np.diff(t))) * 0.9 if t.size > 1 else 0.5
    obs = float(family["T"])
    crit = family.get("critical_value")

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        ax.bar(
            t,
            c / c.sum(),
            width=width,
            color="#9bb7d4",
            edgecolor="#4a6f96",
            linewidth=0.4,
            label=f"permutation null (B = {int(c.sum())})",
        )
        ax.axvline(obs, color="#c62828", linewidth=1.6, label=f"observed T = {obs:.2f}")
        if isinstance(crit, int | float):
            ax.axvline(
                float(crit),
                color="#555555",
                linestyle="--",
                linewidth=1.0,
                label=f"95th percentile = {float(crit):.2f}",
            )
        ax.set_xlabel("T = Σ (R − E₀)")
        ax.set_ylabel("share of permutations")
        ax.legend(loc="upper left", fontsize=7.5, framealpha=0.85)

    return svg_figure(draw, size=_SIZE, prefix=prefix)


def rho_curve_svg(family: Mapping[str, Any], alpha: float, prefix: str) -> str | None:
    curve = family.get("rho_curve") or {}
    rho, share = curve.get("rho") or [], curve.get("share_le") or []
    if not rho:
        return None
    up = family.get("rho_upper")

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        ax.plot(
            [float(r) for r in rho],
            [float(v) for v in share],
            marker="o",
            markersize=2.2,
            linewidth=1.2,
            color="#1f5f99",
            label="share of simulated T ≤ observed T",
        )
        ax.axhline(alpha, color="#c62828", linestyle="--", linewidth=1.0, label=f"α = {alpha:g}")
        if isinstance(up, int | float):
            ax.axvline(float(up), color="#2e7d32", linewidth=1.2, label=f"ρ_upper = {float(up):.2f}")
        ax.set_xlabel("ρ (persistence)")
        ax.set_ylabel("share")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"ρ_upper: {family.get('rho_upper_label', '—')}", fontsize=9)
        ax.legend(loc="best", fontsize=7.5, framealpha=0.85)  # where the curve leaves room

    return svg_figure(draw, size=_SIZE, prefix=prefix)
