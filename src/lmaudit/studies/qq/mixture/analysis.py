"""QQ mixture analysis: the rows of every component in; the aggregate's result with the plain
estimand's and every component's beside it out. Pure: no model, no I/O.

1. Rows are grouped by the component they measure: the plain estimand's rows carry no
   ``persona``; a persona's log-prob rows carry its id; sampled rows of a component other than
   the plain one carry its ``persona`` and ``temperature``.
2. Each component is analysed on its own, exactly as a single estimand
   (:func:`lmaudit.studies.qq.estimation.analyze`); a log-prob component at ``T != 1`` reads its
   persona's forward pass tempered (:func:`.mixture.temper`). The plain estimand likewise.
3. The aggregate per (item, mapping) is the weighted mixture of the component joints
   (:mod:`.estimand`); its envelope carries every component's unassigned mass (over the sampled
   base: every component's confidence region at ``alpha / K``, :mod:`.sampling_error`); its verdict,
   Gamma class and saturation are decided as for a single estimand
   (:func:`lmaudit.studies.qq.estimation.assemble`).
4. Component-level diagnostics per item and for the study (:func:`mixture_section`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from lmaudit.errors import InputError
from lmaudit.stats.intervals import bonferroni
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.diagnostics import n_saturated_positions
from lmaudit.studies.qq.estimation import analyze, assemble
from lmaudit.studies.qq.gates import split_rows
from lmaudit.studies.qq.mixture.estimand import (
    diagnose_item,
    mix_positions,
    mixture_envelope,
    position_weights,
    temper,
)
from lmaudit.studies.qq.mixture.plan import NO_PERSONA, Component
from lmaudit.studies.qq.mixture.section import (
    ComponentItem,
    ComponentSummary,
    Distances,
    EstimandCounts,
    MixtureCounts,
    MixtureSaturation,
    MixtureSection,
    NearDeterministic,
    PlainSummary,
)
from lmaudit.studies.qq.params import QQParams
from lmaudit.studies.qq.records import Measurement
from lmaudit.studies.qq.result import QQResult
from lmaudit.studies.qq.results import ItemResult, QQResults
from lmaudit.studies.qq.sampling_error import ItemRegion, SamplingRegion

__all__ = ["aggregate", "analyze_mixture", "component_rows", "mixture_section", "tempered"]

Key = tuple[str | None, float | None]


def component_rows(
    rows: Sequence[dict[str, Any]],
    comps: Sequence[Component],
    base: str,
    plain_temperature: float,
    source: str,
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """``(plain rows, component id -> its rows)``; InputError naming a component with no rows."""
    groups: dict[Key, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("kind", "position") == "position":
            groups.setdefault((r.get("persona"), r.get("temperature")), []).append(r)
    plain = groups.get((None, None), [])
    out: dict[str, list[dict[str, Any]]] = {}
    for c in comps:
        if base == "logprob":
            key: Key = (None, None) if c.persona == NO_PERSONA else (c.persona, None)
        else:
            own = c.persona == NO_PERSONA and c.temperature == plain_temperature
            key = (None, None) if own else (c.persona, c.temperature)
        if not groups.get(key):
            raise InputError(f"{source}: no measurements of mixture component {c.id!r}")
        out[c.id] = groups[key]
    return plain, out


def tempered(ms: Sequence[Measurement], temperature: float) -> list[Measurement]:
    """Log-prob records of the temperature-``T`` component (same label mass, tempered split)."""
    if temperature == 1.0:
        return list(ms)
    out = []
    for m in ms:
        if m.estimand != "logprob":
            out.append(m)
            continue
        p_y, p_n = temper(m.p_y, m.p_n, temperature)
        out.append(
            dataclasses.replace(
                m, probs={**m.probs, m.label_of["y"]: float(p_y), m.label_of["n"]: float(p_n)}
            )
        )
    return out


def _region_bounds(
    regions: Sequence[SamplingRegion], keys: Sequence[tuple[str, str]]
) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` of every component's ``P(y)`` at each (item, mapping) of ``keys``: ``(K, R, 6)``."""
    out = []
    for region in regions:
        by_key = {(it.item, m): bs for it in region.items for m, bs in it.p_bounds.items()}
        out.append([[(b.lo, b.hi) for b in by_key[k]] for k in keys])
    b = np.array(out, dtype=np.float64)  # (K, R, 6, 2)
    return b[..., 0], b[..., 1]


def _aggregate_region(regions: Sequence[SamplingRegion], alpha: float) -> SamplingRegion:
    """The aggregate's region: every component's, each at ``alpha / K`` (Bonferroni over components)."""
    items = []
    for per_comp in zip(*(r.items for r in regions), strict=True):
        items.append(
            ItemRegion(
                item=per_comp[0].item,
                n_bounds=sum(r.n_bounds for r in per_comp),
                alpha_bound=min(r.alpha_bound for r in per_comp),
                min_draws=min(r.min_draws for r in per_comp),
                p_bounds={},  # each component's bounds: its own region, decided at alpha / K
            )
        )
    return SamplingRegion(alpha=alpha, items=tuple(items))


def aggregate(
    results: Sequence[QQResult],
    comps: Sequence[Component],
    params: QQParams,
    regions: Sequence[SamplingRegion] | None = None,
) -> QQResult:
    """The aggregate of the component results (same items and mappings, in the same order).

    ``regions`` (sampled base): each component's confidence region at ``alpha / K``; the
    aggregate's envelope is then taken over all of them, so its decisions carry every
    component's sampling error at family-wise level ``alpha`` per item."""
    keys = [(it.item, m.mapping) for it in results[0].items for m in it.mappings]
    for c, r in zip(comps, results, strict=True):
        mine = [(it.item, m.mapping) for it in r.items for m in it.mappings]
        if mine != keys:
            missing = sorted(set(keys) ^ set(mine))
            raise ValueError(f"mixture component {c.id!r} measured other items or mappings: {missing[:5]}")

    def stack(attr: str) -> np.ndarray:  # (K, R, 6)
        return np.array(
            [
                [[getattr(p, attr) for p in m.positions] for it in r.items for m in it.mappings]
                for r in results
            ]
        )

    p, p_y, p_n, other = stack("p"), stack("p_y"), stack("p_n"), stack("other")
    w_ab = np.array([c.weight for c in comps])
    w_ba = np.array([c.weight_ba for c in comps])
    pw = position_weights(p, w_ab, w_ba)
    margins = np.array([[m.precision for it in r.items for m in it.mappings] for r in results]).max(axis=0)
    if regions is None:
        box = mixture_envelope(p_y, p_n, other, w_ab, w_ba)
    else:  # each P(y) anywhere in its component's [lo, hi]: the masses whose allocation box that is
        lo, hi = _region_bounds(regions, keys)
        box = mixture_envelope(lo, 1.0 - hi, hi - lo, w_ab, w_ba)
    return assemble(
        keys,
        {it.item: it.stratum for it in results[0].items},
        (mix_positions(p_y, pw), mix_positions(p_n, pw), mix_positions(other, pw)),
        mix_positions(p, pw),
        box,
        [float(x) for x in margins],
        dataclasses.replace(params, estimand="mixture"),
        sampling=None if regions is None else _aggregate_region(regions, params.region_alpha),
    )


def _compact(it: ItemResult) -> ComponentItem:
    return ComponentItem(
        it.item,
        it.q,
        it.oss,
        it.q_env,
        it.gamma_bounds,
        it.verdict,
        it.gamma_class,
        it.saturated,
        it.n_saturated_positions,
        it.max_other,
    )


def _summary(r: QQResult) -> dict[str, Any]:
    """The fields an estimand's summary shares (:class:`.section.ComponentSummary`, ``PlainSummary``)."""
    return {
        "counts": EstimandCounts(r.verdict_counts(), r.gamma_counts(), sum(it.saturated for it in r.items)),
        "saturation_sensitivity": r.saturation_counts(),
        "max_other": r.max_other,
        "items": tuple(_compact(it) for it in r.items),
    }


def _near_deterministic(p: Sequence[float], threshold: float) -> float:
    return n_saturated_positions(p, threshold) / len(p) if len(p) else float("nan")


def mixture_section(
    agg: QQResult, plain: QQResult, results: Sequence[QQResult], comps: Sequence[Component], base: str
) -> MixtureSection:
    """The ``mixture`` section of results.json: components, the plain estimand, per-item
    diagnostics, study counts and the distances of Fig. 1 (aggregate, plain, each family)."""
    threshold = agg.params.saturation_threshold
    diags = []
    for it in agg.items:
        parts = [(c.id, c.weight, r.item(it.item)) for c, r in zip(comps, results, strict=True)]
        mine = [p for p in plain.items if p.item == it.item]
        diags.append(diagnose_item(it.item, it, parts, mine[0] if mine else None))
    temps = sorted({c.temperature for c in comps})
    families: dict[str, list[float]] = {}
    for c, r in zip(comps, results, strict=True):
        name = f"T{c.temperature:g}" if len(temps) > 1 else "components"
        families.setdefault(name, []).extend(p for it in r.items for p in it.p_values())
    p_agg = [p for it in agg.items for p in it.p_values()]
    p_plain = [p for it in plain.items for p in it.p_values()]
    n_sat = [sum(it.saturated for it in r.items) for r in results]

    def dist(p: Sequence[float]) -> list[float]:
        return sorted(float(d) for d in 1.0 - np.maximum(np.asarray(p), 1.0 - np.asarray(p)))

    return MixtureSection(
        base=base,
        order_matched=all(c.weight == c.weight_ba for c in comps),
        n_components=len(comps),
        components=tuple(
            ComponentSummary(
                id=c.id,
                persona=c.persona,
                temperature=c.temperature,
                weight=c.weight,
                weight_ba=c.weight_ba,
                **_summary(r),
            )
            for c, r in zip(comps, results, strict=True)
        ),
        plain=PlainSummary(estimand=base, **_summary(plain)),
        items=tuple(diags),
        counts=MixtureCounts(
            averaged_away=sum(d.averaged_away for d in diags),
            dispersion_restored=sum(bool(d.dispersion_restored) for d in diags),
            component_verdicts={v: sum(d.component_verdicts[v] for d in diags) for v in env.VERDICTS},
            saturated=MixtureSaturation(
                aggregate=sum(it.saturated for it in agg.items),
                plain=sum(it.saturated for it in plain.items),
                components_min=min(n_sat),
                components_max=max(n_sat),
                components_mean=float(np.mean(n_sat)),
            ),
        ),
        near_deterministic=NearDeterministic(
            threshold=threshold,
            aggregate=_near_deterministic(p_agg, threshold),
            plain=_near_deterministic(p_plain, threshold),
            families={k: _near_deterministic(v, threshold) for k, v in families.items()},
        ),
        distances=Distances(
            aggregate=tuple(dist(p_agg)),
            plain=tuple(dist(p_plain)),
            families={k: tuple(dist(v)) for k, v in families.items()},
        ),
    )


def analyze_mixture(
    rows: Sequence[dict[str, Any]],
    comps: Sequence[Component],
    base: str,
    plain_temperature: float,
    params: QQParams,
    source: str,
) -> tuple[QQResults, list[Measurement]]:
    """``(results, the plain estimand's records)`` of a mixture run's rows (gates G1 and G3
    not run: :func:`lmaudit.studies.qq.analysis.analyze_rows` adds them)."""
    plain_rows, by_comp = component_rows(rows, comps, base, plain_temperature, source)
    at_base = dataclasses.replace(params, estimand=base)

    def run(what: str, ms: list[Measurement]) -> QQResult:
        try:
            return analyze(ms, at_base)
        except ValueError as e:
            raise InputError(f"{source}: {what}: {e}") from None

    def records(c: Component) -> list[Measurement]:
        ms = split_rows(by_comp[c.id], source)[0]
        return tempered(ms, c.temperature) if base == "logprob" else ms

    plain_ms = split_rows(plain_rows, source)[0]
    plain = run("plain estimand", plain_ms)
    results = [run(f"mixture component {c.id!r}", records(c)) for c in comps]
    named = [
        ("plain estimand", plain),
        *((f"mixture component {c.id!r}", r) for c, r in zip(comps, results, strict=True)),
    ]
    for what, r in named:
        if r.excluded:  # one estimand's item left out: the aggregate has no joint to mix there
            x = r.excluded[0]
            u = x.undefined[0]
            mapping, order, position, first = u.mapping, u.order, u.position, u.first_answer
            raise InputError(
                f"{source}: {what}: item {x.item!r}, mapping {mapping!r}, order {order!r}, position "
                f"{position} (first answer {first!r}): no probability on either label (p_y = p_n = 0); "
                "a mixture needs P(y | y or n) of every component at every position"
            )
    regions: list[SamplingRegion] | None = None
    if base == "sampled":  # the aggregate's region: every component's at alpha / K
        wide = dataclasses.replace(at_base, sampled_alpha=bonferroni(params.region_alpha, len(comps)))
        regions = []
        for c in comps:
            region = analyze(records(c), wide).sampling  # the records passed run() above
            assert region is not None  # a sampled analysis always has one
            regions.append(region)
    try:
        agg = aggregate(results, comps, params, regions)
    except ValueError as e:
        raise InputError(f"{source}: {e}") from None
    max_other = max([plain.max_other, *(r.max_other for r in results)])
    mass = dataclasses.replace(  # every measured position, as gate G2 reads it
        agg.mass, max_other=max_other, g2_pass=max_other < params.g2_max_other
    )
    section = mixture_section(agg, plain, results, comps, base)
    return agg.results(mass=mass, mixture=section), plain_ms
