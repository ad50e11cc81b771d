"""The draws study behind the pipeline (seed 004): do a model's sampled answers persist from
one draw to the next? Plan, measure (sample, or import sequences drawn elsewhere), analyze."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmaudit.backends.cached import CachedBackend
from lmaudit.interop import audit as log_audit
from lmaudit.interop import scores as log_scores
from lmaudit.interop.detect import detect
from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import InputError
from lmaudit.reporting.page import read_rows
from lmaudit.studies.base import Measured, Measurements, Plan, RunContext, Study, StudyResult
from lmaudit.studies.draws.analysis import analyze_records, metric_key
from lmaudit.studies.draws.config import DrawsStudyConfig
from lmaudit.studies.draws.family import AnalysisParams
from lmaudit.studies.draws.foreign import foreign_rows
from lmaudit.studies.draws.importer import ImportRows, read_import, validate_record
from lmaudit.studies.draws.protocol import build_requests, load_probes, make_normaliser
from lmaudit.studies.draws.report.page import render_report
from lmaudit.studies.registry import register_study

__all__ = ["DrawsStudy", "analyze_rows", "settings"]

# the columns `lmaudit compare` shows for this study's runs
COMPARE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("families", "metric:n_families", "model families analysed"),
    ("sequences", "metric:n_sequences", "draw sequences analysed (after exclusions and de-duplication)"),
    ("rejected (Holm)", "metric:n_rejected", "families whose persistence test rejects (Holm-corrected)"),
    ("min Holm p", "metric:min_holm_p", "the smallest Holm-adjusted p of the run's families"),
    ("max rho_upper", "metric:max_rho_upper", "the largest upper bound on persistence rho of its families"),
    ("flagged sources", "tag:flagged_sources", "family:source pairs the grouped-sequence diagnostic flags"),
    (
        "max design effect",
        "metric:error_bars.max_design_effect",
        "imported logs: the largest (clustered / naive standard error)^2 of a model's scores on a task",
    ),
    (
        "max clustered/log SE",
        "metric:error_bars.max_clustered_over_log",
        "imported logs: the largest ratio of the sample-clustered standard error to the stderr the log reports",
    ),
)
# what names the data in an imported audit: an open registration (prereg data: open) binds
# the plan without these, so predictions can be frozen before the draws file exists
DATA_KEYS = ("config.study.import_path", "inputs.import")


def settings(cfg: DictConfig) -> DrawsStudyConfig:
    obj = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(DrawsStudyConfig), cfg.study))
    assert isinstance(obj, DrawsStudyConfig)
    return obj


def rho_grid(s: DrawsStudyConfig) -> tuple[float, ...]:
    if not (0.0 <= s.rho_min < s.rho_max <= 1.0) or s.rho_step <= 0:
        raise InputError(
            f"study: need 0 <= rho_min < rho_max <= 1 and rho_step > 0, got "
            f"{s.rho_min}, {s.rho_max}, {s.rho_step}"
        )
    steps = math.floor((s.rho_max - s.rho_min) / s.rho_step + 1e-9)
    return tuple(round(s.rho_min + i * s.rho_step, 10) for i in range(steps + 1))


def analysis_params(s: DrawsStudyConfig) -> AnalysisParams:
    for field, value in (("permutations", s.permutations), ("sims_per_step", s.sims_per_step)):
        if value < 1:
            raise InputError(f"study: field {field!r} must be >= 1, got {value}")
    if not 0.0 < s.alpha < 1.0:
        raise InputError(f"study: field 'alpha' must lie in (0, 1), got {s.alpha}")
    if any(not 0.0 <= r <= 1.0 for r in s.power_rhos):
        raise InputError(f"study: field 'power_rhos' must hold values in [0, 1], got {s.power_rhos}")
    return AnalysisParams(
        n_perm=s.permutations,
        rho_grid=rho_grid(s),
        n_sims=s.sims_per_step,
        power_rhos=tuple(float(r) for r in s.power_rhos),
        alpha=s.alpha,
        grouped_flag_p=s.grouped_flag_p,
        seed=s.analysis_seed,
    )


def default_run_name(cfg: DictConfig) -> str:
    s = settings(cfg)
    if s.import_path:
        return f"import-{Path(s.import_path).stem}"
    return f"n{s.n}-t{s.temperature:g}-r{s.replicates}-{s.normalise.kind}-{cfg.model.name}"


def _requests(cfg: DictConfig, s: DrawsStudyConfig) -> list[Any]:
    if s.n < 1 or s.replicates < 1 or s.max_tokens < 1:
        raise InputError(
            f"study: n, replicates and max_tokens must be >= 1, got {s.n}, {s.replicates}, {s.max_tokens}"
        )
    names = [c.name for c in s.conditions]
    if not names or len(set(names)) != len(names):
        raise InputError(f"study: field 'conditions' needs distinct names, got {names}")
    probes = load_probes(s.probes_path, s.probe_ids)
    conds = [{"name": c.name, "system": c.system, "temperature": c.temperature} for c in s.conditions]
    exemplars = [{"prompt": e.prompt, "answer": e.answer} for e in s.exemplars]
    return build_requests(
        probes,
        conds,
        exemplars,
        replicates=s.replicates,
        n=s.n,
        temperature=s.temperature,
        top_p=s.top_p,
        max_tokens=s.max_tokens,
        seed=s.seed,
    )


def _normaliser(s: DrawsStudyConfig) -> Any:
    return make_normaliser(
        s.normalise.kind,
        pattern=s.normalise.pattern,
        labels=s.normalise.labels,
        case_sensitive=s.normalise.case_sensitive,
    )


def plan(cfg: DictConfig, *, freezing_open: bool = False) -> Plan:
    """The resolved plan: config, input digests and (sampling) every request, with its digest."""
    s = settings(cfg)
    analysis_params(s)
    _normaliser(s)
    resolved = DrawsStudy().plan_config(cfg)
    if s.import_path:
        p = Path(s.import_path)
        inputs: dict[str, dict[str, Any]]
        found = detect(p, s.import_format) if p.exists() else None
        if found is not None and found.format != "lmaudit":  # a log: every file it reads
            inputs = {"import": log_audit.plan_inputs(found)}
        elif found is not None:
            inputs = {"import": {"path": str(p), "sha256": file_sha256(p)}}
        elif freezing_open:  # the data come later; the registration omits them
            inputs = {"import": {"path": str(p), "sha256": None}}
        else:
            raise InputError(f"{p}: file not found (study.import_path)")
        requests: list[dict[str, Any]] = []
    else:
        inputs = {"probes": {"path": s.probes_path, "sha256": file_sha256(s.probes_path)}}
        requests = [
            {
                "messages": list(r.messages),
                "n": r.n,
                "temperature": r.temperature,
                "top_p": r.top_p,
                "max_tokens": r.max_tokens,
                "seed": r.seed,
                "meta": r.meta,
            }
            for r in _requests(cfg, s)
        ]
    body = {
        "study": DrawsStudy.name,
        "mode": "import" if s.import_path else "sample",
        "config": resolved,
        "inputs": inputs,
        "requests": requests,
    }
    return Plan.make(body, len(requests))


def measure(cfg: DictConfig, cached: CachedBackend | None) -> list[dict[str, Any]] | ImportRows:
    """Sequence rows: sampled through the cache (draw order kept), or the import file's,
    validated whole and then read again one at a time as they are written; another tool's log
    becomes sequence rows and ``log_audit`` rows (:mod:`.foreign`)."""
    s = settings(cfg)
    if s.import_path:
        found = detect(s.import_path, s.import_format)
        if found.format == "lmaudit":
            return read_import(s.import_path)
        return foreign_rows(found, _normaliser(s), dataclasses.asdict(s.normalise))
    if cached is None:
        raise InputError("study draws: sampling needs a backend (study.import_path is not set)")
    norm = _normaliser(s)
    requests = _requests(cfg, s)
    results = cached.sample(requests, desc="draws")
    rows = []
    for req, res in zip(requests, results, strict=True):
        row = {
            "kind": "refused" if res.refused else "sequence",
            "family": str(cfg.model.name),
            "source": s.source,
            "condition": req.meta["condition"],
            "probe": req.meta["probe"],
            "replicate": req.meta["replicate"],
            "seed": req.seed,
        }
        if res.refused:  # a sequence with a refused draw has no draw-to-draw order to test
            rows.append({**row, "refusals": list(res.refusals), "raw": list(res.texts)})
        else:
            rows.append({**row, "draws": [norm(t) for t in res.texts], "raw": list(res.texts)})
    return rows


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


def headline(results: dict[str, Any]) -> float:
    """The share of families whose persistence test rejects after Holm's correction."""
    n = results["n_families"]
    return results["n_rejected"] / n if n else float("nan")


def _key(name: str) -> str:
    return metric_key(name)


def metrics(results: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {
        "n_families": results["n_families"],
        "n_rejected": results["n_rejected"],
        "n_sequences": results["data"]["analysed_sequences"],
        "n_excluded": results["data"]["excluded"]["n"],
        "n_deduplicated": results["data"]["deduplicated"]["n_dropped"],
        "n_refused": results["data"].get("refused", {}).get("sequences", 0),
    }
    fams = results["families"]
    if fams:
        out["share_rejected"] = headline(results)
    for stat, pick in (("holm_p", min), ("rho_upper", max)):
        values = [float(f[stat]) for f in fams.values() if isinstance(f.get(stat), int | float)]
        if values:
            out[f"{pick.__name__}_{stat}"] = pick(values)
    # one family (a sampled run): its numbers under the same keys whatever the model, which a
    # tag names; several (an import): each family's under its name, beside the keys above
    for name, f in fams.items():
        k = "" if len(fams) == 1 else f"{_key(name)}."
        for m in ("T", "p", "holm_p", "rho_hat", "rho_upper", "n_informative", "n_uninformative"):
            if isinstance(f.get(m), int | float):
                out[f"{k}{m}"] = float(f[m])
        out[f"{k}drift_p"] = float(f["drift"]["p"])
        ci = f.get("rho_hat_ci") or {}
        if ci.get("low") is not None:  # rho_hat's bootstrap interval over prompts (.bootstrap)
            out[f"{k}rho_hat_ci_low"], out[f"{k}rho_hat_ci_high"] = float(ci["low"]), float(ci["high"])
        for r, v in f["power"].items():
            out[f"{k}power_{r}"] = float(v)
    if results.get("log_audit"):
        out.update(log_audit.log_audit_metrics(results["log_audit"]))
    if results.get("error_bars"):
        out.update(log_scores.error_bars_metrics(results["error_bars"], _key))
    return out


def _verdict(f: dict[str, Any]) -> str:
    return ("persistence" if f["reject"] else "not rejected") + f" (rho_upper {f['rho_upper_label']})"


def tags(results: dict[str, Any]) -> dict[str, str]:
    fams = results["families"]
    if len(fams) == 1:
        ((name, f),) = fams.items()
        t = {"family": name, "verdict": _verdict(f)}
    else:
        t = {f"family.{_key(n)}": _verdict(f) for n, f in fams.items()}
        # a family whose key is not its name (characters MLflow refuses, a path): its name
        t.update({f"family_name.{_key(n)}": n for n in fams if _key(n) != n})
    t["model"] = ",".join(fams)[:500]  # the families measured (a sampled run's: its model)
    t["mode"] = str(results.get("mode"))
    t["flagged_sources"] = (
        ",".join(f"{n}:{s}" for n, f in results["families"].items() for s in f["flagged_sources"]) or "none"
    )
    if results.get("log_audit"):
        t.update(log_audit.log_audit_tags(results["log_audit"]))
    return t


def _ci_text(f: dict[str, Any]) -> str:
    ci = f.get("rho_hat_ci") or {}
    return "" if ci.get("low") is None else f" [{ci['low']:.3f}, {ci['high']:.3f}]"


def summary(results: dict[str, Any]) -> str:
    fams = "; ".join(
        f"{n}: T={f['T']:.2f} p={f['p']:.4g} Holm p={f['holm_p']:.4g} rho_hat="
        f"{'-' if f['rho_hat'] is None else format(f['rho_hat'], '.3f')}{_ci_text(f)} rho_upper {f['rho_upper_label']}"
        f" drift p={f['drift']['p']:.4g}"
        for n, f in results["families"].items()
    )
    d = results["data"]
    audit = results.get("log_audit")
    bars = "; ".join(
        f"{n} {t}: {e['accuracy']:.3f} ± {e['se_clustered']:.3f} clustered"
        + (f" (log {e['log_stderr']:.3f})" if e["log_stderr"] is not None else "")
        for n, tasks in (results.get("error_bars") or {}).items()
        for t, e in tasks.items()
    )
    return (
        f"draws: {results['n_families']} families, {d['analysed_sequences']} sequences "
        f"({d['excluded']['n']} excluded, {d['deduplicated']['n_dropped']} prefix duplicates dropped) | "
        f"{results['n_rejected']} rejected (Holm) | {fams}"
        + (f" | {log_audit.log_audit_line(audit)}" if audit else "")
        + (f" | error bars: {bars}" if bars else "")
    )


def plot_data(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: the rho_upper curves, the permutation nulls, the source table."""
    curve, null = [], []
    for n, f in results["families"].items():
        curve += [
            {"family": n, "rho": r, "share_le": s}
            for r, s in zip(f["rho_curve"]["rho"], f["rho_curve"]["share_le"], strict=True)
        ]
        null += [
            {"family": n, "T": t, "count": c} for t, c in zip(f["null"]["T"], f["null"]["count"], strict=True)
        ]
    # family and source first, the numbers after (a row read back from results.json has its
    # keys sorted)
    sources = [{"family": r.get("family"), "source": r.get("source"), **r} for r in results["sources"]]
    return {"rho_curve": curve, "null": null, "sources": sources}


@register_study
class DrawsStudy(Study):
    """Do a model's sampled answers persist from one draw to the next (seed 004)?"""

    name = "draws"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_sequences", "n_rejected", "min_holm_p", "max_rho_upper")
    config = DrawsStudyConfig
    # what names the data in an imported audit: an open registration (prereg data: open) binds
    # the plan without these, so predictions can be frozen before the draws file exists
    data_keys = ("config.study.import_path", "inputs.import")
    compare_columns = COMPARE_COLUMNS
    has_yaml = True

    def default_run_name(self, cfg: DictConfig) -> str:
        return default_run_name(cfg)

    def plan_config(self, cfg: DictConfig) -> dict[str, Any]:
        """The format of the import is a fact of the data: the plan records it under
        ``inputs.import`` (a data key), so an open registration scores a log of any format."""
        out = super().plan_config(cfg)
        out["study"].pop("import_format", None)
        return out

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        rows = measure(ctx.cfg, backend)
        fmt = (plan.inputs.get("import") or {}).get("format")
        return Measured(rows, audit={"import_format": fmt} if fmt else {})

    def plan(self, ctx: RunContext) -> Plan:
        return plan(ctx.cfg, freezing_open=ctx.freezing_open)

    def needs_backend(self, cfg: DictConfig) -> bool:
        """Imported draws need no model: the pipeline then loads none and records none."""
        return not settings(cfg).import_path

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        return self.result(analyze_rows(cfg, measurements.iter_rows(), measurements.source))

    headline = staticmethod(headline)  # type: ignore[assignment]
    metrics = staticmethod(metrics)  # type: ignore[assignment]
    tags = staticmethod(tags)  # type: ignore[assignment]
    summary = staticmethod(summary)  # type: ignore[assignment]

    def report(self, result: StudyResult, ctx: RunContext) -> str:
        plan_doc = ctx.plan.doc if ctx.plan is not None else None
        audit = dict(ctx.audit)
        rows = read_rows(audit, ctx.run_dir)
        return render_report(results=result.results, plan=plan_doc, audit=audit, rows=rows)

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        return plot_data(result.results)
