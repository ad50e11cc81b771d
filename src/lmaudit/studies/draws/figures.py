"""The draws report's figures as inline SVG (matplotlib SVG canvas, text kept as text).

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

from lmaudit.svg import inline_svg

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["null_svg", "rho_curve_svg"]

_RC: Any = {"svg.fonttype": "none", "font.size": 9.0, "axes.grid": True, "grid.alpha": 0.3}


def _svg(fig: Figure, prefix: str) -> str:
    return inline_svg(fig, prefix, _RC)


def _fig() -> tuple[Figure, Any]:
    from matplotlib import rc_context

    with rc_context(_RC):
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5.2, 2.9))
        ax = fig.add_subplot(111)
    return fig, ax


def null_svg(family: Mapping[str, Any], prefix: str) -> str | None:
    null = family.get("null") or {}
    t, c = np.asarray(null.get("T") or [], dtype=float), np.asarray(null.get("count") or [], dtype=float)
    if t.size == 0:
        return None
    from matplotlib import rc_context

    with rc_context(_RC):
        fig, ax = _fig()
        width = float(np.min(np.diff(t))) * 0.9 if t.size > 1 else 0.5
        ax.bar(
            t,
            c / c.sum(),
            width=width,
            color="#9bb7d4",
            edgecolor="#4a6f96",
            linewidth=0.4,
            label=f"permutation null (B = {int(c.sum())})",
        )
        obs = float(family["T"])
        ax.axvline(obs, color="#c62828", linewidth=1.6, label=f"observed T = {obs:.2f}")
        crit = family.get("critical_value")
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
        fig.tight_layout()
        return _svg(fig, prefix)


def rho_curve_svg(family: Mapping[str, Any], alpha: float, prefix: str) -> str | None:
    curve = family.get("rho_curve") or {}
    rho, share = curve.get("rho") or [], curve.get("share_le") or []
    if not rho:
        return None
    from matplotlib import rc_context

    with rc_context(_RC):
        fig, ax = _fig()
        ax.plot(
            rho,
            share,
            marker="o",
            markersize=2.2,
            linewidth=1.2,
            color="#1f5f99",
            label="share of simulated T ≤ observed T",
        )
        ax.axhline(alpha, color="#c62828", linestyle="--", linewidth=1.0, label=f"α = {alpha:g}")
        up = family.get("rho_upper")
        if isinstance(up, int | float):
            ax.axvline(float(up), color="#2e7d32", linewidth=1.2, label=f"ρ_upper = {float(up):.2f}")
        ax.set_xlabel("ρ (persistence)")
        ax.set_ylabel("share")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"ρ_upper: {family.get('rho_upper_label', '—')}", fontsize=9)
        ax.legend(loc="upper right", fontsize=7.5, framealpha=0.85)
        fig.tight_layout()
        return _svg(fig, prefix)
