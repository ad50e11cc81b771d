"""The draws report's figures as inline SVG (matplotlib, through :func:`lmaudit.figures.svg_figure`).

* :func:`null_svg`: per family, the permutation null distribution of ``T`` (bars: share of
  the ``B`` permutations at each value) with the observed ``T`` and the ``1 - alpha``
  critical value;
* :func:`rho_curve_svg`: per family, the share of synthetic datasets with ``T_sim <= T`` by
  ``rho``, with the ``alpha`` line that defines ``rho_upper``.

Both take one family's typed results (:class:`..results.Family`) and return ``None`` when there
is nothing to draw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lmaudit.figures import svg_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from lmaudit.studies.draws.results import Column, Family

__all__ = ["null_svg", "rho_curve_svg"]

_SIZE = (5.2, 2.9)  # inches


def null_svg(family: Family, prefix: str) -> str | None:
    t, c = np.asarray(family.null.T, dtype=float), np.asarray(family.null.count, dtype=float)
    if t.size == 0 or t.size != c.size or not np.isfinite(c).all() or c.sum() <= 0:
        return None
    width = float(np.min(np.diff(t))) * 0.9 if t.size > 1 else 0.5
    obs = family.T
    crit = family.critical_value

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
        ax.axvline(
            crit,
            color="#555555",
            linestyle="--",
            linewidth=1.0,
            label=f"95th percentile = {crit:.2f}",
        )
        ax.set_xlabel("T = Σ (R − E₀)")
        ax.set_ylabel("share of permutations")
        ax.legend(loc="upper left", fontsize=7.5, framealpha=0.85)

    return svg_figure(draw, size=_SIZE, prefix=prefix)


def rho_curve_svg(family: Column, alpha: float, prefix: str) -> str | None:
    rho, share = family.rho_curve.rho, family.rho_curve.share_le
    if not rho:
        return None
    up = family.rho_upper

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
        if up is not None:
            ax.axvline(up, color="#2e7d32", linewidth=1.2, label=f"ρ_upper = {up:.2f}")
        ax.set_xlabel("ρ (persistence)")
        ax.set_ylabel("share")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"ρ_upper: {family.rho_upper_label}", fontsize=9)
        ax.legend(loc="best", fontsize=7.5, framealpha=0.85)  # where the curve leaves room

    return svg_figure(draw, size=_SIZE, prefix=prefix)
