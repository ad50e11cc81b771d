"""From measurement rows (:func:`analyze_rows`) and sequence records (:func:`analyze_records`)
to the draws study's typed results, :class:`.results.DrawsResults` (pure: records + settings in).

Exclusion patterns, then prefix de-duplication, then :func:`analyze_family` per family,
Holm's correction across families (the registered result, and again with flagged sources
left out), and a flat per-source table (registered predictions are scored by the platform).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from omegaconf import DictConfig

from lmaudit.errors import InputError
from lmaudit.interop import audit as log_audit
from lmaudit.interop import scores as log_scores
from lmaudit.interop.sections import EpochsPersist, ErrorBar, NormaliseRule
from lmaudit.stats.multiplicity import holm
from lmaudit.studies.draws.family import (
    AnalysisParams,
    ColumnResult,
    FamilyAnalysis,
    GroupedDiagnostic,
    analyze_family,
)
from lmaudit.studies.draws.importer import SequenceRecord, dedup_prefixes, exclude, validate_record
from lmaudit.studies.draws.keys import check_metric_keys, metric_key
from lmaudit.studies.draws.planning import analysis_params, settings
from lmaudit.studies.draws.results import (
    Column,
    Data,
    Deduplicated,
    DrawsResults,
    DriftTest,
    Excluded,
    Family,
    FamilyWithoutFlagged,
    GroupedRow,
    Holm,
    HolmRow,
    Params,
    PermutationNull,
    Refused,
    RhoCurve,
    SourceRow,
)

__all__ = ["analyze_records", "analyze_rows", "check_metric_keys", "metric_key"]


def _interval(col: ColumnResult, grid: Sequence[float]) -> tuple[float | None, float | None]:
    if col.rho_upper_status == "uninformative":
        return (float(grid[-1]), None)
    if col.rho_upper_status == "below_grid":
        return (None, float(grid[0]))
    return (col.rho_upper, col.rho_upper)


def _column_fields(col: ColumnResult, grid: Sequence[float]) -> dict[str, Any]:
    """The fields every column shares (:class:`.results.Column`)."""
    return {
        "n_sequences": col.n_sequences,
        "n_informative": col.n_informative,
        "n_uninformative": col.n_sequences - col.n_informative,
        "n_draws": col.n_draws,
        "R": col.repeats,
        "E0": col.expected,
        "T": col.statistic,
        "p": col.pvalue,
        "rho_hat": col.rho_hat,
        "rho_upper": col.rho_upper,
        "rho_upper_status": col.rho_upper_status,
        "rho_upper_label": col.rho_upper_label,
        "rho_upper_interval": _interval(col, grid),
        "rho_cal": col.rho_cal,
        "critical_value": col.critical_value,
        "power": {f"{r:g}": v for r, v in col.power.items()},
        "drift": DriftTest(T_drift=col.drift, p=col.drift_pvalue),
        "rho_curve": RhoCurve(
            rho=tuple(float(r) for r in grid), share_le=tuple(float(s) for s in col.share_le)
        ),
    }


def _null(col: ColumnResult) -> PermutationNull:
    values, counts = np.unique(col.null_repeats, return_counts=True)
    return PermutationNull(
        T=tuple(round(float(v) - col.expected, 9) for v in values),
        count=tuple(int(c) for c in counts),
        B=int(col.null_repeats.size),
    )


def _grouped(g: GroupedDiagnostic) -> GroupedRow:
    n = g.n_informative
    return GroupedRow(
        source=g.source,
        n_informative=n,
        n_grouped=g.n_grouped,
        share_grouped=g.n_grouped / n if n else None,
        expected=g.expected,
        expected_share=g.expected / n if n else None,
        p=g.pvalue,
        flagged=g.flagged,
    )


def _source_row(family: str, col: ColumnResult, grouped: GroupedRow) -> SourceRow:
    return SourceRow(
        family=family,
        source=col.name,
        n_sequences=col.n_sequences,
        n_informative=col.n_informative,
        n_draws=col.n_draws,
        R=col.repeats,
        E0=col.expected,
        T=col.statistic,
        p=col.pvalue,
        rho_hat=col.rho_hat,
        rho_upper=col.rho_upper,
        rho_upper_label=col.rho_upper_label,
        T_drift=col.drift,
        drift_p=col.drift_pvalue,
        share_grouped=grouped.share_grouped,
        expected_share_grouped=grouped.expected_share,
        grouped_p=grouped.p,
        flagged=grouped.flagged,
    )


def _family(
    fa: FamilyAnalysis, grid: Sequence[float], n_deduplicated: int, registered: HolmRow, without: HolmRow
) -> Family:
    """One family's result, with its Holm-corrected p (registered, and without flagged sources)."""
    grouped = sorted((_grouped(g) for g in fa.grouped), key=lambda g: g.source)
    wf = fa.without_flagged
    assert fa.family.rho_hat_ci is not None, "analyze_family is given each sequence's prompt"
    return Family(
        **_column_fields(fa.family, grid),
        rho_hat_ci=fa.family.rho_hat_ci,
        null=_null(fa.family),
        n_deduplicated=n_deduplicated,
        drift_beyond_persistence=fa.drift_robust,
        grouped=tuple(grouped),
        flagged_sources=tuple(g.source for g in grouped if g.flagged),
        without_flagged=None
        if wf is None
        else FamilyWithoutFlagged(**_column_fields(wf, grid), holm_p=without.holm_p, reject=without.reject),
        sources={c.name: Column(**_column_fields(c, grid)) for c in fa.sources},
        holm_p=registered.holm_p,
        reject=registered.reject,
    )


def _holm_rows(p: Sequence[float], names: Sequence[str], alpha: float) -> tuple[HolmRow, ...]:
    h = holm(p, alpha)
    return tuple(
        HolmRow(name=n, p=float(pv), holm_p=float(a), reject=bool(r))
        for n, pv, a, r in zip(names, h.pvalues, h.adjusted, h.reject, strict=True)
    )


def analyze_records(
    records: Sequence[SequenceRecord],
    params: AnalysisParams,
    *,
    exclude_patterns: Sequence[str],
    mode: str = "import",
    normalise: NormaliseRule | None = None,
    refused: Refused | None = None,
) -> DrawsResults:
    """The whole registered analysis of ``records`` (plus descriptions per source); ``mode``,
    ``normalise`` and ``refused`` say how the records were obtained (:func:`analyze_rows`)."""
    grid = list(params.rho_grid)
    kept, excluded = exclude(records, exclude_patterns)
    kept, dropped = dedup_prefixes(kept)
    by_family: dict[str, list[SequenceRecord]] = {}
    for r in kept:
        by_family.setdefault(r.family, []).append(r)
    check_metric_keys(r.family for r in records)
    dropped_by: dict[str, int] = {}
    for r in dropped:
        dropped_by[r.family] = dropped_by.get(r.family, 0) + 1

    names = sorted(by_family)
    analyses = [
        analyze_family(
            name,
            [r.draws for r in by_family[name]],
            [r.source for r in by_family[name]],
            params,
            [(r.condition, r.probe) for r in by_family[name]],
        )
        for name in names
    ]
    p_reg = [fa.family.pvalue for fa in analyses]
    p_wo = [(fa.without_flagged or fa.family).pvalue for fa in analyses]
    h_reg = _holm_rows(p_reg, names, params.alpha)
    h_wo = _holm_rows(p_wo, names, params.alpha)
    families = {
        name: _family(fa, grid, dropped_by.get(name, 0), h_reg[i], h_wo[i])
        for i, (name, fa) in enumerate(zip(names, analyses, strict=True))
    }
    table = [
        _source_row(name, c, next(g for g in families[name].grouped if g.source == c.name))
        for name, fa in zip(names, analyses, strict=True)
        for c in fa.sources
    ]
    return DrawsResults(
        study="draws",
        mode=mode,
        normalise=normalise,
        params=Params(
            B=params.n_perm,
            rho_grid=tuple(grid),
            sims_per_step=params.n_sims,
            power_rhos=tuple(params.power_rhos),
            alpha=params.alpha,
            grouped_flag_p=params.grouped_flag_p,
            seed=params.seed,
            exclude_patterns=tuple(exclude_patterns),
        ),
        data=Data(
            records=len(records),
            excluded=Excluded(n=sum(excluded.values()), by_pattern=excluded),
            deduplicated=Deduplicated(n_dropped=len(dropped), by_family=dict(sorted(dropped_by.items()))),
            analysed_sequences=len(kept),
            families=tuple(names),
            refused=refused or Refused(),
        ),
        families=families,
        holm=Holm(alpha=params.alpha, registered=h_reg, without_flagged=h_wo),
        sources=tuple(table),
        n_families=len(names),
        n_rejected=sum(h.reject for h in h_reg),
        any_flagged=any(f.flagged_sources for f in families.values()),
    )


def _refused(rows: list[dict[str, Any]]) -> Refused:
    """The sampled sequences the server refused a draw of: counted, never analysed."""
    reasons: Counter[str] = Counter()
    n = 0
    for row in rows:
        if isinstance(row, dict) and row.get("kind") == "refused":
            n += 1
            reasons.update(str(r).split(":")[0] for r in row.get("refusals") or [] if r is not None)
    return Refused(sequences=n, draws=sum(reasons.values()), reasons=dict(sorted(reasons.items())))


def _error_bars(
    audit_rows: list[dict[str, Any]], families: Mapping[str, Family], source: str
) -> dict[str, dict[str, ErrorBar]]:
    """The error bars of the logs' scores (:mod:`lmaudit.interop.scores`), each beside this
    study's question: do the model's epochs persist?"""
    out: dict[str, dict[str, ErrorBar]] = {}
    for family, tasks in log_scores.error_bars_section(audit_rows, f"{source}: log_audit rows").items():
        fam = families.get(family)
        persist = (
            EpochsPersist(
                reject=fam.reject, holm_p=fam.holm_p, rho_hat=fam.rho_hat, rho_upper_label=fam.rho_upper_label
            )
            if fam
            else None
        )
        out[family] = {
            task: dataclasses.replace(entry, epochs_persist=persist) for task, entry in tasks.items()
        }
    return out


def analyze_rows(cfg: DictConfig, rows: Iterable[dict[str, Any]], source: str) -> DrawsResults:
    """Pure: sequence rows + config in, results out (no model, no clock). The rows are
    read once, one at a time; a sequence is kept as a record sharing its names and answers
    with the others, not as its row."""
    s = settings(cfg)
    records = []
    memo: dict[Any, Any] = {}
    refused_rows = []
    audit_rows = []  # another tool's log: what it gets wrong (.foreign)
    seeded = False
    for i, row in enumerate(rows, start=1):
        where = f"{source}: record {i}" + (f" (line {row['line']} of the import)" if "line" in row else "")
        kind = row.get("kind", "sequence") if isinstance(row, dict) else None
        if kind == "refused" and "seed" in row:
            seeded = True
            refused_rows.append(row)
            continue
        if kind == log_audit.AUDIT_KIND:
            audit_rows.append(log_audit.check_audit_row(row, where))
            if row.get("scores") is not None:
                log_scores.check_scores(row["scores"], where)
            continue
        if kind != "sequence":
            raise InputError(f"{where}: field 'kind' = {kind!r} is not 'sequence'")
        seeded = seeded or "seed" in row
        records.append(validate_record(row, where, memo))
    refused = _refused(refused_rows)
    if not records:
        why = f" (the server refused a draw of all {refused.sequences})" if refused.sequences else ""
        why = " (every draw of the logs was left out: see their log_audit rows)" if audit_rows else why
        raise InputError(f"{source}: no sequences to analyse{why}")
    mode = "import" if s.import_path or not seeded else "sample"
    rule = s.normalise
    results = analyze_records(
        records,
        analysis_params(s),
        exclude_patterns=list(s.exclude_patterns),
        mode=mode,
        normalise=NormaliseRule(
            kind=rule.kind,
            pattern=rule.pattern,
            labels=tuple(rule.labels),
            case_sensitive=rule.case_sensitive,
        )
        if mode == "sample"
        else None,
        refused=refused,
    )
    if not audit_rows:
        return results
    # another tool's log; its answers were normalised when the log was read: that rule
    section = log_audit.log_audit_section(audit_rows, f"{source}: log_audit rows")
    error_bars = _error_bars(audit_rows, results.families, source)
    return dataclasses.replace(
        results, log_audit=section, normalise=section.normalise, error_bars=error_bars or None
    )
