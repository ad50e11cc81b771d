"""From measurement rows (:func:`analyze_rows`) and sequence records (:func:`analyze_records`)
to the results dict of the draws study (pure: records + settings in).

Exclusion patterns, then prefix de-duplication, then :func:`analyze_family` per family,
Holm's correction across families (the registered result, and again with flagged sources
left out), and a flat per-source table (registered predictions are scored by the platform).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from omegaconf import DictConfig

from lmaudit.errors import InputError
from lmaudit.interop import audit as log_audit
from lmaudit.interop import scores as log_scores
from lmaudit.stats.multiplicity import holm
from lmaudit.studies.draws.family import AnalysisParams, ColumnResult, analyze_family
from lmaudit.studies.draws.importer import SequenceRecord, dedup_prefixes, exclude, validate_record
from lmaudit.studies.draws.planning import analysis_params, settings

__all__ = ["analyze_records", "analyze_rows", "check_metric_keys", "metric_key"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-/ ]")


#: the longest key kept as it is (MLflow keys hold 250 characters, a metric's suffix included)
_MAX_KEPT = 200


def _path_safe(key: str) -> bool:
    """Whether MLflow takes ``key`` as a path: no empty, ``.`` or ``..`` part and no leading dot
    (it refuses a key that is not its own normalised path: ``/data/m``, ``a//b``, ``a/../b``,
    ``..x``, ``x/``)."""
    if not key or len(key) > _MAX_KEPT or key.startswith("."):
        return False
    return all(part not in ("", ".", "..") for part in key.split("/"))


def metric_key(name: str) -> str:
    """A family's name as MLflow metric and tag keys take it: characters MLflow refuses become
    ``_``, and names of safe characters keep their name (so ``dvc metrics`` keys stay put).
    A key that is still no safe path (``/data/models/llama-3-8b``, ``a//b``, ``a/../b``, longer
    than 200 characters) becomes one, stable and distinct per name: its empty and dot-only
    parts dropped, each part stripped of leading and trailing dots and spaces, then ``-`` and
    the first 8 hex digits of the name's SHA-256 (``data/models/llama-3-8b-<digest>``); the
    name itself is tag ``family_name.<key>``. Names that would share a key are refused before
    analysis (:func:`check_metric_keys`)."""
    key = _UNSAFE.sub("_", name)
    if _path_safe(key):
        return key
    parts = (part.strip(". ") for part in key.split("/"))
    readable = "/".join(part for part in parts if part)[:_MAX_KEPT].strip("/. ")
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable}-{digest}" if readable else f"family-{digest}"


def check_metric_keys(names: Iterable[str]) -> None:
    """InputError naming the families whose metric keys would collide (e.g. ``a<b``, ``a>b``)."""
    by_key: dict[str, list[str]] = {}
    for n in sorted(set(names)):
        by_key.setdefault(metric_key(n), []).append(n)
    clashes = {k: v for k, v in by_key.items() if len(v) > 1}
    if clashes:
        shown = "; ".join(f"{', '.join(map(repr, v))} -> {k!r}" for k, v in sorted(clashes.items()))
        raise InputError(
            f"field 'family': families whose names differ only in characters metric keys cannot "
            f"hold would share a metric key ({shown}); rename one of them"
        )


def _interval(col: ColumnResult, grid: Sequence[float]) -> list[float | None]:
    if col.rho_upper_status == "uninformative":
        return [float(grid[-1]), None]
    if col.rho_upper_status == "below_grid":
        return [None, float(grid[0])]
    return [col.rho_upper, col.rho_upper]


def _col(col: ColumnResult, grid: Sequence[float], *, null: bool = False) -> dict[str, Any]:
    return {**col.to_json(grid, null=null), "rho_upper_interval": _interval(col, grid)}


def _source_row(family: str, col: ColumnResult, grouped: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "family": family,
        "source": col.name,
        "n_sequences": col.n_sequences,
        "n_informative": col.n_informative,
        "n_draws": col.n_draws,
        "R": col.repeats,
        "E0": col.expected,
        "T": col.statistic,
        "p": col.pvalue,
        "rho_hat": col.rho_hat,
        "rho_upper": col.rho_upper,
        "rho_upper_label": col.rho_upper_label,
        "T_drift": col.drift,
        "drift_p": col.drift_pvalue,
        "share_grouped": grouped["share_grouped"],
        "expected_share_grouped": grouped["expected_share"],
        "grouped_p": grouped["p"],
        "flagged": grouped["flagged"],
    }


def analyze_records(
    records: Sequence[SequenceRecord],
    params: AnalysisParams,
    *,
    exclude_patterns: Sequence[str],
) -> dict[str, Any]:
    """The whole registered analysis of ``records`` (plus descriptions per source)."""
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

    families: dict[str, dict[str, Any]] = {}
    table: list[dict[str, Any]] = []
    p_reg: list[float] = []
    p_wo: list[float] = []
    for name in sorted(by_family):
        recs = by_family[name]
        fa = analyze_family(
            name,
            [r.draws for r in recs],
            [r.source for r in recs],
            params,
            [(r.condition, r.probe) for r in recs],
        )
        grouped = {g.source: g.to_json() for g in fa.grouped}
        fam = _col(fa.family, grid, null=True)
        fam.update(
            {
                "n_deduplicated": dropped_by.get(name, 0),
                "drift_beyond_persistence": fa.drift_robust,
                "grouped": [grouped[s] for s in sorted(grouped)],
                "flagged_sources": sorted(s for s, g in grouped.items() if g["flagged"]),
                "without_flagged": _col(fa.without_flagged, grid) if fa.without_flagged is not None else None,
                "sources": {c.name: _col(c, grid) for c in fa.sources},
            }
        )
        families[name] = fam
        table += [_source_row(name, c, grouped[c.name]) for c in fa.sources]
        p_reg.append(fa.family.pvalue)
        p_wo.append(fa.without_flagged.pvalue if fa.without_flagged is not None else fa.family.pvalue)

    names = sorted(families)
    h_reg = holm(p_reg, params.alpha)
    h_wo = holm(p_wo, params.alpha)
    for i, name in enumerate(names):
        families[name]["holm_p"] = float(h_reg.adjusted[i])
        families[name]["reject"] = bool(h_reg.reject[i])
        wf = families[name]["without_flagged"]
        if wf is not None:
            wf["holm_p"] = float(h_wo.adjusted[i])
            wf["reject"] = bool(h_wo.reject[i])
    results: dict[str, Any] = {
        "study": "draws",
        "params": {
            "B": params.n_perm,
            "rho_grid": grid,
            "sims_per_step": params.n_sims,
            "power_rhos": list(params.power_rhos),
            "alpha": params.alpha,
            "grouped_flag_p": params.grouped_flag_p,
            "seed": params.seed,
            "exclude_patterns": list(exclude_patterns),
        },
        "data": {
            "records": len(records),
            "excluded": {"n": sum(excluded.values()), "by_pattern": excluded},
            "deduplicated": {"n_dropped": len(dropped), "by_family": dict(sorted(dropped_by.items()))},
            "analysed_sequences": len(kept),
            "families": names,
        },
        "families": families,
        "holm": {
            "alpha": params.alpha,
            "registered": h_reg.to_json(names),
            "without_flagged": h_wo.to_json(names),
        },
        "sources": table,
        "n_families": len(names),
        "n_rejected": int(h_reg.reject.sum()),
        "any_flagged": any(f["flagged_sources"] for f in families.values()),
    }
    return results


def _refused(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The sampled sequences the server refused a draw of: counted, never analysed."""
    reasons: Counter[str] = Counter()
    n = 0
    for row in rows:
        if isinstance(row, dict) and row.get("kind") == "refused":
            n += 1
            reasons.update(str(r).split(":")[0] for r in row.get("refusals") or [] if r is not None)
    return {"sequences": n, "draws": sum(reasons.values()), "reasons": dict(sorted(reasons.items()))}


def analyze_rows(cfg: DictConfig, rows: Iterable[dict[str, Any]], source: str) -> dict[str, Any]:
    """Pure: sequence rows + config in, results dict out (no model, no clock). The rows are
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
        why = f" (the server refused a draw of all {refused['sequences']})" if refused["sequences"] else ""
        why = " (every draw of the logs was left out: see their log_audit rows)" if audit_rows else why
        raise InputError(f"{source}: no sequences to analyse{why}")
    results = analyze_records(records, analysis_params(s), exclude_patterns=list(s.exclude_patterns))
    results["data"]["refused"] = refused
    mode = "import" if s.import_path or not seeded else "sample"
    out = {
        **results,
        "mode": mode,
        "normalise": dataclasses.asdict(s.normalise) if mode == "sample" else None,
    }
    if audit_rows:  # the answers were normalised when the log was read: that rule
        out["log_audit"] = log_audit.log_audit_section(audit_rows)
        out["normalise"] = out["log_audit"]["normalise"]
        error_bars = log_scores.error_bars_section(audit_rows)
        for family, tasks in error_bars.items():  # beside each, this study's question: do epochs persist?
            fam = results["families"].get(family)
            persist = {k: fam[k] for k in ("reject", "holm_p", "rho_hat", "rho_upper_label")} if fam else None
            for entry in tasks.values():
                entry["epochs_persist"] = persist
        if error_bars:
            out["error_bars"] = error_bars
    return out
