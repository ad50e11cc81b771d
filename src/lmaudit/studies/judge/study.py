"""The judge study behind the pipeline (seed 001): does a content-preserving change of
presentation flip an LLM judge's pairwise verdicts? Plan, measure (judge, or import results
recorded elsewhere), analyze; the report lives in :mod:`.report`."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import DictConfig

from lmaudit.backends.base import BackendError
from lmaudit.backends.cached import CachedBackend
from lmaudit.provenance.digest import file_sha256, json_digest
from lmaudit.provenance.io import InputError
from lmaudit.reporting.page import read_rows
from lmaudit.studies.base import (
    Measured,
    Measurements,
    NotCombinable,
    Plan,
    RunContext,
    Study,
    StudyResult,
)
from lmaudit.studies.judge import planning
from lmaudit.studies.judge.analysis import analyze_rows, headline, metrics, plot_data, summary, tags
from lmaudit.studies.judge.config import (
    JudgeConditionSetConfig,
    JudgeRubricConfig,
    JudgeStudyConfig,
    JudgeWrapperConfig,
)
from lmaudit.studies.judge.freeze import protocol_artifacts, result_artifacts
from lmaudit.studies.judge.importer import ImportSource, import_rows, import_source
from lmaudit.studies.judge.measure import measure_fresh, measure_shared, readout_rows
from lmaudit.studies.judge.packets import (
    load_candidates,
)
from lmaudit.studies.judge.planning import (
    conditions,
    judge_text,
    sampling,
    settings,
)
from lmaudit.studies.judge.report.page import render_report
from lmaudit.studies.judge.sweep import combine_sweep, design_key
from lmaudit.studies.registry import register_study

__all__ = ["JudgeStudy", "conditions", "judge_text", "sampling", "settings"]

# the columns `lmaudit compare` shows for this study's runs
COMPARE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("conditions", "tag:conditions", "the wrapper conditions judged"),
    ("isolation", "tag:isolation", "fresh: no judgment sees another; shared: one context (a deviation)"),
    ("prompts", "metric:n_prompts", "prompts judged per condition"),
    ("k", "metric:k", "judgments per prompt and condition (replicates)"),
    ("invalid", "metric:n_invalid", "judgments whose verdict could not be read"),
    ("PA vs P0", "metric:disagreement.PA.rate", "share of judgments that changed from P0 under PA"),
    ("PB vs P0", "metric:disagreement.PB.rate", "share of judgments that changed from P0 under PB"),
    ("PAB vs P0", "metric:disagreement.PAB.rate", "share of judgments that changed from P0 under PAB"),
    ("SWAP vs P0", "metric:disagreement.SWAP.rate", "share changed from P0 with A and B swapped"),
    (
        "position consistency",
        "metric:order_swap.position_consistency",
        "imported pairs judged in both orders: share with the same winner (or TIE) in both (Shi et al.)",
    ),
    (
        "preference fairness",
        "metric:order_swap.preference_fairness",
        "(recency- - primacy-preferred pairs) / pairs, in [-1, 1]: below 0 the first-shown answer is favoured",
    ),
    (
        "random order: first wins",
        "metric:order_swap.randomized.first_rate",
        "imported pairs judged once in a random order: share of decisive verdicts won by the first shown",
    ),
    (
        "random order: p",
        "metric:order_swap.randomized.p",
        "exact two-sided binomial test of that share against 1/2 (valid if the order was random)",
    ),
    ("deviations", "tag:deviations", "deviations from the protocol recorded for the run (none: none)"),
)


def measure(cfg: DictConfig, the_plan: Plan, cached: CachedBackend | None) -> Measured:
    """Judge every condition's packet (or read the import); the pipeline has frozen the
    protocol (:func:`protocol_artifacts`) before this is called."""
    s = settings(cfg)
    conds, _ = conditions(cfg)
    src = import_source(s)
    if src is not None:
        return Measured(import_rows(src, conds))
    if cached is None:
        raise InputError("study judge: judging needs a backend (study.import_path is not set)")
    backend = cached.backend
    samp = sampling(s)
    text = judge_text(cfg)
    cands = load_candidates(s.candidates_path, s.prompt_ids)
    if s.isolation == "fresh":
        rows, prompts = measure_fresh(conds, cands, text, samp, cached)
    else:
        rows, prompts = measure_shared(conds, cands, text, samp, cached)
    readout: list[dict[str, Any]] = []
    readout_note = "off (study.readout=false)"
    if s.readout and hasattr(backend, "label_logprobs") and hasattr(backend, "check_single_token"):
        judged = [r for r in rows if r["final"]]
        try:
            readout = readout_rows(
                judged,
                prompts,
                {c.id: c for c in conds},
                text,
                dict(s.readout_labels),
                cached,
                s.top_k,
                backend.check_single_token,
            )
            readout_note = "P(A), P(B), P(TIE) after the judge prompt and the readout turn"
        except (BackendError, InputError) as e:  # the verdicts stand without it; say why it is missing
            readout_note = f"failed: {e}"
    elif s.readout:
        readout_note = "not available: the backend has no label log-probability contract"
    deviations = []
    if s.isolation == "shared":
        deviations.append(
            {
                "id": "shared_context",
                "description": "all judgments of a replicate were made in one conversation (shared context) "
                "instead of a fresh context per judgment; shared state can raise cross-condition "
                "consistency and bias disagreement downward",
            }
        )
    design = {
        "kind": "design",
        "source": "judged",
        "isolation": s.isolation,
        "deviations": deviations,
        "judge": {"name": str(cfg.model.name), "identity_digest": cached.digest},
        "seed": s.seed,
        "seed_rule": "sha256('{seed}:{condition}:{prompt}:{replicate}:{attempt}')[:8] & (2^63-1)",
        "k": s.k,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "max_tokens": s.max_tokens,
        "max_attempts": s.retry.max_attempts,
        "rubric_sha256": text.rubric_sha256,
        "plan_digest": the_plan.digest,
        "readout": readout_note,
    }
    judge = {"name": str(cfg.model.name), "identity_digest": cached.digest}
    all_rows = [design, *rows, *readout]
    return Measured(all_rows, artifacts=result_artifacts(all_rows, the_plan.doc, judge))


# settings added after plans were first frozen: left out of the plan at their defaults, so
# every plan made before they existed (and every frozen registration) keeps its digest
_LATER_KEYS = {"import_path": None, "import_format": "auto", "answers_path": None}


def plan_config(cfg: DictConfig) -> dict[str, Any]:
    """The plan's record of the config (:func:`planning.plan_config`), without the import
    settings that hold their defaults."""
    out = planning.plan_config(cfg)
    study = out["study"]
    out["study"] = {k: v for k, v in study.items() if k not in _LATER_KEYS or v != _LATER_KEYS[k]}
    return out


def default_run_name(cfg: DictConfig) -> str:
    s = settings(cfg)
    if s.import_path:
        p = Path(s.import_path)
        return f"import-{p.name}-{cfg.study.condition.name}" if p.is_dir() else f"import-{p.stem}"
    return planning.default_run_name(cfg)


def _foreign_plan(cfg: DictConfig, src: ImportSource) -> Plan:
    """The plan of a FastChat or AlpacaEval import: the file's digest, its format, and the
    whole file read once now, so bad input is refused before the run folder exists."""
    conds, _ = conditions(cfg)
    import_rows(src, conds)
    inputs: dict[str, Any] = {
        "import": {src.format: {"path": str(src.path), "sha256": file_sha256(src.path)}}
    }
    if src.answers is not None:
        from lmaudit.interop.fastchat import answer_files

        files = [{"path": str(f), "sha256": file_sha256(f)} for f in answer_files(src.answers)]
        inputs["answers"] = {"path": str(src.answers), "sha256": json_digest(files), "files": files}
    body = {
        "study": "judge",
        "mode": "import",
        "config": plan_config(cfg),
        "inputs": inputs,
        "import_format": src.format,
    }
    return Plan.make(body, 0)


def plan(cfg: DictConfig) -> Plan:
    """The resolved plan (:func:`planning.plan`), its config recorded by :func:`plan_config`."""
    src = import_source(settings(cfg))
    if src is not None and src.format != "lmaudit":
        return _foreign_plan(cfg, src)
    base = cfg
    if src is not None and src.setting == "study.import_path":  # a folder: the import_dir plan
        base = copy.deepcopy(cfg)
        base.study.import_dir, base.study.import_path = str(src.path), None
    made = planning.plan(base)
    body = {k: v for k, v in made.doc.items() if k not in ("n_requests", "plan_digest")}
    body["config"] = plan_config(cfg)
    return Plan.make(body, made.n_requests)


def audit_section(results: Mapping[str, Any]) -> dict[str, Any]:
    """The audit record's ``judge`` section: judge identity, rubric digest, isolation, seeds,
    deviations."""
    d = results.get("design", {})
    return {
        "judge": d.get("judge"),
        "rubric_sha256": d.get("rubric_sha256"),
        "isolation": d.get("isolation"),
        "deviations": results.get("deviations", []),
        "seed": d.get("seed"),
        "seed_rule": d.get("seed_rule"),
        "k": d.get("k"),
        "mode": results.get("mode"),
        "invalid": results.get("validity", {}).get("invalid"),
    }


def results_template(cfg: DictConfig) -> dict[str, Any]:
    """A results dict of this plan's shape (every judgment a valid 'A'), to check at freeze
    time that predictions name real metrics."""
    s = settings(cfg)
    conds, _ = conditions(cfg)
    src = import_source(s)
    if src is not None:
        return analyze_rows(cfg, import_rows(src, conds), "<template>")
    ids = [c.prompt_id for c in load_candidates(s.candidates_path, s.prompt_ids)]
    rows: list[dict[str, Any]] = [{"kind": "design", "source": "judged", "isolation": s.isolation}]
    for c in conds:
        for pid in ids:
            for r in range(s.k):
                rows.append(
                    {
                        "kind": "judgment",
                        "source": "judged",
                        "condition": c.id,
                        "item": pid,
                        "replicate": r,
                        "attempt": 0,
                        "final": True,
                        "swap": c.swap,
                        "wrap": sorted(c.wrap),
                        "valid": True,
                        "winner": "A",
                        "winner_original": "B" if c.swap else "A",
                        "confidence": 1.0,
                        "reason": "-",
                    }
                )
    return analyze_rows(cfg, rows, "<template>")


@register_study
class JudgeStudy(Study):
    """Does a content-preserving change of presentation flip an LLM judge (seed 001)?"""

    name = "judge"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_prompts", "k", "n_invalid", "disagreement_rate")
    config = JudgeStudyConfig
    groups: ClassVar[Mapping[str, type]] = {
        "condition": JudgeConditionSetConfig,
        "rubric": JudgeRubricConfig,
        "wrapper": JudgeWrapperConfig,
    }
    compare_columns = COMPARE_COLUMNS
    has_yaml = True

    def default_run_name(self, cfg: DictConfig) -> str:
        return default_run_name(cfg)

    def plan_config(self, cfg: DictConfig) -> dict[str, Any]:
        return plan_config(cfg)

    def plan(self, ctx: RunContext) -> Plan:
        return plan(ctx.cfg)

    def needs_backend(self, cfg: DictConfig) -> bool:
        """Imported results need no judge: the pipeline then loads no model."""
        s = settings(cfg)
        return not (s.import_dir or s.import_path)

    def artifacts(self, plan: Plan) -> dict[str, bytes]:
        return protocol_artifacts(plan.doc) if plan.get("mode") == "judge" else {}

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        return measure(ctx.cfg, plan, backend)

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        return self.result(analyze_rows(cfg, measurements.rows, measurements.source))

    headline = staticmethod(headline)  # type: ignore[assignment]
    metrics = staticmethod(metrics)  # type: ignore[assignment]
    tags = staticmethod(tags)  # type: ignore[assignment]
    summary = staticmethod(summary)  # type: ignore[assignment]

    def report(self, result: StudyResult, ctx: RunContext) -> str:
        plan_doc = ctx.plan.doc if ctx.plan is not None else None
        audit = dict(ctx.audit)
        rows = read_rows(audit, ctx.run_dir)
        return render_report(results=result.results, plan=plan_doc, audit=audit, rows=rows)

    def audit_section(self, result: StudyResult) -> dict[str, Any] | None:
        return audit_section(result.results)

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        return plot_data(result.results)

    def results_template(self, cfg: DictConfig) -> Mapping[str, Any] | None:
        return results_template(cfg)

    def design_key(self, cfg: DictConfig) -> str | None:
        return design_key(cfg)

    def combine_sweep(self, cfgs: list[DictConfig], run_dirs: list[Path], out: Path) -> DictConfig:
        try:
            return combine_sweep(cfgs, run_dirs, out)
        except InputError as e:
            raise NotCombinable(str(e)) from None
