"""The mixture section of the QQ report (``estimand=mixture``): the component-level diagnostics
beside the aggregate verdicts, and Fig. 1 for the aggregate, the plain estimand and each
component family. Reads only ``results["mixture"]``; returns None for any other run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lmaudit.figures import svg_figure
from lmaudit.reporting import num as _num
from lmaudit.studies.qq.report.figures import cdf_axes, cdf_left, cdf_step

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["mixture_alerts", "mixture_cdf_svg", "mixture_view"]

_STYLE = {"aggregate": ("#1f77b4", 2.4, "-"), "plain": ("#333333", 1.8, "--")}
_FAMILY_COLOURS = ("#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def _curves(mix: Mapping[str, Any]) -> list[tuple[str, list[float]]]:
    d = mix.get("distances") or {}
    curves = [("aggregate", d.get("aggregate") or []), ("plain", d.get("plain") or [])]
    curves += [(f"family {k}", v or []) for k, v in (d.get("families") or {}).items()]
    return [(name, [float(x) for x in v]) for name, v in curves if v]


def mixture_cdf_svg(results: Mapping[str, Any]) -> str | None:
    """Fig. 1 of a mixture run: the distance-from-determinism CDF of the aggregate, the plain
    estimand and each component family (all their components' positions pooled)."""
    mix = results.get("mixture")
    if not isinstance(mix, Mapping):
        return None
    curves = _curves(mix)
    if not curves:
        return None
    threshold = _num((mix.get("near_deterministic") or {}).get("threshold"))
    cut = None if threshold is None else 1.0 - threshold
    lo = cdf_left(min(min(v) for _, v in curves), cut)

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        for k, (name, d) in enumerate(curves):
            colour, lw, ls = _STYLE.get(name, (_FAMILY_COLOURS[k % len(_FAMILY_COLOURS)], 1.3, "-"))
            cdf_step(ax, d, lo, cut, f"{name} (n={len(d)})", color=colour, lw=lw, ls=ls)
        cdf_axes(
            ax,
            lo,
            cut,
            threshold,
            "distance from determinism d = 1 − max(p, 1 − p)",
            "Figure M1. Saturation of the mixture, the plain estimand and each family",
        )
        fig.legend(loc="outside lower center", ncol=2, fontsize=7.5, frameon=False)

    return svg_figure(draw, size=(6.6, 4.8), prefix="figm1")


def mixture_view(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the template shows of a mixture run: counts, per-item diagnostics, components."""
    mix = results.get("mixture")
    if not isinstance(mix, Mapping):
        return None
    items = [it for it in mix.get("items") or [] if isinstance(it, Mapping)]
    plain = {
        str(it.get("item")): it
        for it in (mix.get("plain") or {}).get("items") or []
        if isinstance(it, Mapping)
    }
    rows = []
    for it in items:
        spread = it.get("q_spread") or {}
        sat = it.get("saturated") or {}
        p = plain.get(str(it.get("item"))) or {}
        rows.append(
            {
                **it,
                "q_min": spread.get("min"),
                "q_max": spread.get("max"),
                "q_sd": spread.get("sd"),
                "sat_aggregate": sat.get("aggregate"),
                "sat_components": sat.get("components"),
                "sat_plain": sat.get("plain"),
                "plain_verdict": p.get("verdict"),
                "plain_q": p.get("q"),
            }
        )
    return {
        "base": mix.get("base"),
        "order_matched": mix.get("order_matched"),
        "n_components": mix.get("n_components"),
        "counts": mix.get("counts") or {},
        "near": mix.get("near_deterministic") or {},
        "items": rows,
        "components": [c for c in mix.get("components") or [] if isinstance(c, Mapping)],
        "plain": mix.get("plain") or {},
    }


def mixture_alerts(view: Mapping[str, Any] | None) -> list[str]:
    """What the aggregate verdicts hide, loudly: items whose component violations are averaged away."""
    if not view:
        return []
    away = [it for it in view.get("items") or [] if it.get("averaged_away")]
    if not away:
        return []
    names = ", ".join(f"{it.get('item')} ({', '.join(it.get('violating_components') or [])})" for it in away)
    return [
        f"The mixture averages away QQ violations on {len(away)} item{'' if len(away) == 1 else 's'}: "
        f"the aggregate is SATISFIED where these components VIOLATE it: {names}. A mixture's "
        "satisfaction is not its components' (Prop. 7); see the mixture section."
    ]
