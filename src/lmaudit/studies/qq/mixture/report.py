"""The mixture section of the QQ report (``estimand=mixture``): the component-level diagnostics
beside the aggregate verdicts, and Fig. 1 for the aggregate, the plain estimand and each
component family. Reads only ``results.mixture``; returns None for any other run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lmaudit.figures import svg_figure
from lmaudit.studies.qq.report.figures import cdf_axes, cdf_left, cdf_step

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from lmaudit.studies.qq.mixture.section import MixtureSection
    from lmaudit.studies.qq.results import QQResults

__all__ = ["mixture_alerts", "mixture_cdf_svg", "mixture_view"]

_STYLE = {"aggregate": ("#1f77b4", 2.4, "-"), "plain": ("#333333", 1.8, "--")}
_FAMILY_COLOURS = ("#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def _curves(mix: MixtureSection) -> list[tuple[str, list[float]]]:
    d = mix.distances
    curves = [("aggregate", d.aggregate), ("plain", d.plain)]
    curves += [(f"family {k}", v) for k, v in d.families.items()]
    return [(name, [float(x) for x in v]) for name, v in curves if v]


def mixture_cdf_svg(results: QQResults) -> str | None:
    """Fig. 1 of a mixture run: the distance-from-determinism CDF of the aggregate, the plain
    estimand and each component family (all their components' positions pooled)."""
    mix = results.mixture
    if mix is None:
        return None
    curves = _curves(mix)
    if not curves:
        return None
    threshold = mix.near_deterministic.threshold
    cut = 1.0 - threshold
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


def mixture_view(results: QQResults) -> dict[str, Any] | None:
    """What the template shows of a mixture run: counts, per-item diagnostics, components."""
    mix = results.mixture
    if mix is None:
        return None
    plain = {it.item: it for it in mix.plain.items}
    rows = []
    for it in mix.items:
        p = plain.get(it.item)
        rows.append(
            {
                "item": it.item,
                "verdict": it.verdict,
                "q": it.q,
                "component_verdicts": it.component_verdicts,
                "averaged_away": it.averaged_away,
                "violating_components": it.violating_components,
                "dispersion_restored": it.dispersion_restored,
                "q_min": it.q_spread.min,
                "q_max": it.q_spread.max,
                "q_sd": it.q_spread.sd,
                "sat_aggregate": it.saturated.aggregate,
                "sat_components": it.saturated.components,
                "sat_plain": it.saturated.plain,
                "plain_verdict": None if p is None else p.verdict,
                "plain_q": None if p is None else p.q,
            }
        )
    return {
        "base": mix.base,
        "order_matched": mix.order_matched,
        "n_components": mix.n_components,
        "counts": mix.counts,
        "near": mix.near_deterministic,
        "items": rows,
        "components": mix.components,
    }


def mixture_alerts(view: Mapping[str, Any] | None) -> list[str]:
    """What the aggregate verdicts hide, loudly: items whose component violations are averaged away."""
    if not view:
        return []
    away = [it for it in view["items"] if it["averaged_away"]]
    if not away:
        return []
    names = ", ".join(f"{it['item']} ({', '.join(it['violating_components'])})" for it in away)
    return [
        f"The mixture averages away QQ violations on {len(away)} item{'' if len(away) == 1 else 's'}: "
        f"the aggregate is SATISFIED where these components VIOLATE it: {names}. A mixture's "
        "satisfaction is not its components' (Prop. 7); see the mixture section."
    ]
