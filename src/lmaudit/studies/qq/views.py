"""The views of QQ results the pipeline records: metrics, tags, the console line and the figure
data, each of :class:`lmaudit.studies.qq.results.QQResults` (the study's layout calls them:
:class:`lmaudit.studies.layout.StudyViews`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lmaudit.studies.qq.mixture.section import MixtureSection
    from lmaudit.studies.qq.results import QQResults
    from lmaudit.studies.qq.summary import AcrossItems

__all__ = ["metrics", "mixture_metrics", "plot_data", "summary", "summary_metrics", "tags"]


def metrics(results: QQResults) -> dict[str, float]:
    c = results.counts
    out: dict[str, float] = {
        "n_items": results.n_items,
        "n_saturated": c.saturated,
        "max_other_mass": results.mass.max_other,
        "max_envelope_width": results.mass.max_envelope_width,
        "share_violated": results.share_violated,
    }
    out.update({f"n_{k.lower()}": v for k, v in c.verdict.items()})
    out.update({f"n_gamma_{k.lower()}": v for k, v in c.gamma_class.items()})
    for row in results.saturation.sensitivity:
        out[f"n_saturated_at_{row.threshold}"] = row.n_saturated
    out.update(summary_metrics(results.across_items))
    if c.excluded is not None:  # items with an undefined P(y | y or n) somewhere (results.ExcludedItem)
        out["n_excluded"] = c.excluded
    for it in results.items:
        out[f"q.{it.item}"] = it.q
        out[f"oss.{it.item}"] = it.oss
    if results.mixture is not None:
        out.update(mixture_metrics(results.mixture))
    return out


def summary_metrics(summ: AcrossItems) -> dict[str, float]:
    """The across-item summaries as metrics (``summary.`` prefix; an interval that is not
    defined, below two items, is left out)."""
    out: dict[str, float] = {}
    le = summ.label_effect
    parts = [
        ("mean_abs_q", summ.mean_abs_q.mean, summ.mean_abs_q.ci),
        ("share_violated", summ.share_violated.share, summ.share_violated.ci),
    ]
    if le is not None:
        parts.append(("label_effect_abs_delta_oss", le.mean, le.ci))
        out["summary.label_effect_large"] = float(le.large)
    for name, value, ci in parts:
        if value is not None:
            out[f"summary.{name}"] = float(value)
        if ci is not None:
            out[f"summary.{name}_ci_low"], out[f"summary.{name}_ci_high"] = float(ci.lo), float(ci.hi)
    return out


def mixture_metrics(mix: MixtureSection) -> dict[str, float]:
    """A mixture run's component-level diagnostics as metrics (``mixture.`` prefix)."""
    c = mix.counts
    sat = c.saturated
    out: dict[str, float] = {
        "mixture.n_components": mix.n_components,
        "mixture.n_averaged_away": c.averaged_away,
        "mixture.n_dispersion_restored": c.dispersion_restored,
        "mixture.n_saturated_aggregate": sat.aggregate,
        "mixture.n_saturated_plain": sat.plain,
        "mixture.n_saturated_components_min": sat.components_min,
        "mixture.n_saturated_components_max": sat.components_max,
        "mixture.n_saturated_components_mean": sat.components_mean,
        **{f"mixture.n_component_{k.lower()}": v for k, v in c.component_verdicts.items()},
        "mixture.near_deterministic_aggregate": mix.near_deterministic.aggregate,
        "mixture.near_deterministic_plain": mix.near_deterministic.plain,
    }
    for name, share in mix.near_deterministic.families.items():
        out[f"mixture.near_deterministic_family.{name}"] = share
    for it in mix.items:
        out[f"mixture.q_range.{it.item}"] = it.q_spread.range
        out[f"mixture.n_violating_components.{it.item}"] = len(it.violating_components)
        out[f"mixture.averaged_away.{it.item}"] = float(it.averaged_away)
    for comp in mix.components:
        for k, v in comp.counts.verdict.items():
            out[f"mixture.component.{comp.id}.n_{k.lower()}"] = v
        out[f"mixture.component.{comp.id}.n_saturated"] = comp.counts.saturated
    return out


def plot_data(results: QQResults) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: the distance-from-determinism CDF and the label-effect scatter."""
    positions: list[dict[str, Any]] = [
        {
            "item": it.item,
            "stratum": it.stratum,
            "mapping": m.mapping,
            "order": cell.order,
            "position": p.position,
            "first_answer": p.first_answer or "",
            "d": p.d,
        }
        for it, m, cell, p in results.positions()
    ]
    positions.sort(key=lambda r: r["d"])
    n = len(positions)
    cdf = [{**r, "cdf": (i + 1) / n} for i, r in enumerate(positions)]
    scatter = []
    for it in results.items:
        by = {m.mapping: m for m in it.mappings}
        if "map1" in by and "map2" in by:
            scatter.append(
                {
                    "item": it.item,
                    "q_map1": by["map1"].q,
                    "q_map2": by["map2"].q,
                    "oss_map1": by["map1"].oss,
                    "oss_map2": by["map2"].oss,
                }
            )
    out: dict[str, list[dict[str, Any]]] = {"distance_cdf": cdf, "label_effect": scatter}
    if results.mixture is not None:
        out["mixture_distance_cdf"] = [dict(r) for r in results.mixture.cdf_rows()]
    return out


def tags(results: QQResults) -> dict[str, str]:
    t = {f"gate.{g}": status for g, status in results.gates.statuses().items()}
    if results.memorization is not None:
        t["memorization_alert"] = str(results.memorization.alert)
    if results.mixture is not None:
        t["mixture.averaged_away"] = str(results.mixture.counts.averaged_away > 0)
        t["mixture.order_matched"] = str(results.mixture.order_matched)
    return t


def summary(results: QQResults) -> str:
    c = results.counts
    v = c.verdict
    g = c.gamma_class
    gates = ", ".join(f"{k} {s}" for k, s in results.gates.statuses().items())
    extra = ""
    summ = results.across_items
    sv, aq, le = summ.share_violated, summ.mean_abs_q, summ.label_effect
    if sv.ci is not None and sv.share is not None:
        extra += f" | share VIOLATED {sv.share:.3f} [{sv.ci.lo:.3f}, {sv.ci.hi:.3f}] (Clopper-Pearson)"
    if aq.ci is not None and aq.mean is not None:
        extra += f", mean |q| {aq.mean:.3f} [{aq.ci.lo:.3f}, {aq.ci.hi:.3f}] (t)"
    if le is not None and le.large and le.mean is not None:
        extra += f", label-mapping effect large (mean |dOSS| {le.mean:.3f})"
    if c.excluded:
        extra += f" | excluded {c.excluded} (no probability on either label at a position)"
    mix = results.mixture
    if mix is not None:
        mc = mix.counts
        extra += (
            f" | mixture of {mix.n_components} components: averaged away {mc.averaged_away}, "
            f"saturated {mc.saturated.aggregate} (plain {mc.saturated.plain})"
        )
    return (
        f"QQ: {results.n_items} items | SATISFIED {v['SATISFIED']}, VIOLATED {v['VIOLATED']}, "
        f"INDETERMINATE {v['INDETERMINATE']} | Gamma: NONCONTEXTUAL {g['NONCONTEXTUAL']}, "
        f"CONTEXTUAL {g['CONTEXTUAL']}, INDETERMINATE {g['INDETERMINATE']} | saturated "
        f"{c.saturated}/{results.n_items} | gates: {gates} | max other mass "
        f"{results.mass.max_other:.3g}" + extra
    )
