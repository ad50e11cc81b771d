"""The choir study behind the pipeline (seed 003): free-list elicitation across a model ensemble.

Measure elicits every ensemble member's lists (or reads lists recorded elsewhere), extracts
their concept items (:mod:`.extract`) and embeds every distinct item and question-vocabulary
term; the measurement file holds the lists, their items and the embeddings, so the analysis
(:mod:`.analysis`) is a pure function of it. With the source-blind ranking on, measure then
draws the candidate pools and asks the evaluators (:mod:`.ranking`), or reads ballots recorded
elsewhere; the ballots are measurement records too (analysed by :mod:`.borda`).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from omegaconf import DictConfig, OmegaConf

from lmaudit.backends.cached import CachedBackend
from lmaudit.config.execution import EMBEDDER_EXECUTION_FIELDS, without_execution
from lmaudit.interop.audit import plan_inputs
from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import InputError
from lmaudit.studies.base import (
    Measured,
    Measurements,
    NotCombinable,
    Plan,
    RunContext,
    Study,
    StudyResult,
    typed,
)
from lmaudit.studies.choir import planning as design
from lmaudit.studies.choir import sweep
from lmaudit.studies.choir.analysis import analyze_rows
from lmaudit.studies.choir.ballots import read_ballots
from lmaudit.studies.choir.calibration import read_calibration
from lmaudit.studies.choir.config import ChoirEnsembleConfig, ChoirStudyConfig
from lmaudit.studies.choir.data import NO_PERSONA, load_profiles
from lmaudit.studies.choir.echo import CALIBRATION_PATH, calibration_texts, load_calibration
from lmaudit.studies.choir.extract import extract_items
from lmaudit.studies.choir.foreign import foreign_lists, log_import
from lmaudit.studies.choir.importer import read_import
from lmaudit.studies.choir.ranking import evaluators, measure_ranking, ranking_mode
from lmaudit.studies.choir.views import headline, metrics, plot_data, summary, tags
from lmaudit.studies.registry import register_study
from lmaudit.text import question_words

__all__ = ["ChoirStudy", "settings"]

COMPARE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("questions", "metric:n_questions", "questions analysed"),
    ("members", "metric:n_models", "ensemble members whose free lists are compared"),
    ("above chance", "metric:above_chance", "questions whose agreement beats chance (signal-to-chance > 1)"),
    ("lift up", "metric:lift_up", "questions whose persona lift exceeds 1"),
    ("model acc", "metric:recover.model.accuracy", "accuracy recovering the member from its lists"),
    ("persona acc", "metric:recover.persona.accuracy", "accuracy recovering the persona from the lists"),
)


def settings(cfg: DictConfig) -> ChoirStudyConfig:
    s = typed(cfg.study, ChoirStudyConfig)
    assert isinstance(s, ChoirStudyConfig)
    return s


def ensemble(cfg: DictConfig, s: ChoirStudyConfig) -> list[dict[str, Any]]:
    members = OmegaConf.to_container(cfg.study.ensemble.members, resolve=True)
    if not members:
        model = OmegaConf.to_container(cfg.model, resolve=True)
        assert isinstance(model, dict)
        return [{str(k): v for k, v in model.items()}]
    assert isinstance(members, list)
    out = []
    for i, m in enumerate(members):
        if not isinstance(m, dict) or "backend" not in m:
            raise InputError(
                f"study: field 'ensemble.members[{i}]' must be a model config with 'backend' and 'name'"
            )
        design.member_name(m, i)
        out.append(m)
    names = [m["name"] for m in out]
    if len(set(names)) != len(names):
        raise InputError(f"study: field 'ensemble.members': member names must be distinct, got {names}")
    return out


def _evaluators(cfg: DictConfig, s: ChoirStudyConfig) -> list[dict[str, Any]]:
    return evaluators(OmegaConf.to_container(cfg.study.ensemble.evaluators, resolve=True), ensemble(cfg, s))


def _vector_text(v: NDArray[np.float32]) -> str:
    return base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")


def plan(cfg: DictConfig, *, freezing_open: bool = False) -> Plan:
    s = settings(cfg)
    if s.generations < 1 or s.items_per_list < 1 or s.max_tokens < 1:
        raise InputError("study: generations, items_per_list and max_tokens must be >= 1")
    resolved = ChoirStudy().plan_config(cfg)
    inputs: dict[str, Any] = {}
    found = log_import(s) if s.import_path and Path(s.import_path).exists() else None
    if found is not None:  # inspect logs: every file read, and the format
        inputs["import"] = plan_inputs(found)
    for key, field_name, given in (
        ("import", "import_path", None if found is not None else s.import_path),
        ("calibration", "calibration_path", s.calibration_path),
        ("profiles", "profiles_path", s.profiles_path),
        ("codebook", "codebook_path", s.codebook_path),
        ("echo_calibration", "echo_calibration_path", s.echo_calibration_path),
        ("ballots", "ranking.import_path", s.ranking.import_path),
    ):
        if given:
            p = Path(given)
            if p.exists():
                inputs[key] = {"path": str(p), "sha256": file_sha256(p)}
            elif freezing_open:  # an open registration: the data come later and are not bound
                inputs[key] = {"path": str(p), "sha256": None}
            else:
                raise InputError(f"{p}: file not found (study.{field_name})")
    m = design.materials(s)
    for name in ("targeted_bank.jsonl", "infinity_chat_100.jsonl", "templates.json", "personas.jsonl"):
        p = Path(s.materials) / name
        inputs[name] = {"path": str(p), "sha256": file_sha256(p)}
    body: dict[str, Any] = {
        "study": "choir",
        "mode": "import" if s.import_path else "elicit",
        "config": resolved,
        "inputs": inputs,
    }
    n = 0
    if not s.import_path:
        qs, conds = design.questions(s, m), design.conditions(s, m)
        members = ensemble(cfg, s)
        reqs = design.requests(s, m, qs, conds)
        body["members"] = [mm["name"] for mm in members]
        body["requests"] = [
            {
                "messages": list(r.messages),
                "n": r.n,
                "temperature": r.temperature,
                "seed": r.seed,
                "meta": r.meta,
            }
            for r in reqs
        ]
        n = len(reqs) * len(members)
    body["ranking"] = ranking_mode(s)
    if body["ranking"] == "elicit":
        body["evaluators"] = [e["name"] for e in _evaluators(cfg, s)]
    return Plan.make(body, n)


def _list_row(
    member: str, meta: Mapping[str, Any], temperature: float, g: int, raw: str, limit: int
) -> dict[str, Any]:
    e = extract_items(raw, limit)
    return {
        "kind": "list",
        "model": member,
        "question": meta["question"],
        "condition": meta["condition"],
        "template": meta["template"],
        "persona": meta["persona"],
        "temperature": temperature,
        "generation": g,
        "raw": raw,
        "items": [i.to_json() for i in e.items],
        "extraction": {
            "entries": e.n_entries,
            "na": e.n_na,
            "empty": e.n_empty,
            "preamble": e.preamble,
            "degenerate": e.n_degenerate,
        },
    }


def _refused_row(
    member: str, meta: Mapping[str, Any], temperature: float, g: int, reason: str
) -> dict[str, Any]:
    return {
        "kind": "refused_list",
        "model": member,
        **{k: meta[k] for k in ("question", "condition", "template", "persona")},
        "temperature": temperature,
        "generation": g,
        "refusal": reason,
    }


def measure(cfg: DictConfig, ctx: RunContext) -> Measured:
    s = settings(cfg)
    m = design.materials(s)
    if ctx.backends is None:
        raise InputError("study choir: measuring needs the pipeline's backends")
    texts_of = {q.id: q.text for q in (design.questions(s, m) if not s.import_path else [])}
    rows: list[dict[str, Any]] = []
    members_audit = []
    profiles = load_profiles(s.profiles_path) if s.profiles_path else {}
    found = log_import(s) if s.import_path else None
    log_rows: list[dict[str, Any]] = []  # an imported log's log_audit rows, written last
    if found is not None:
        rows, log_rows, texts_of = foreign_lists(found, s)
    elif s.import_path:
        rows, texts_of = read_import(s.import_path, s, m, profiles)
    else:
        qs, conds = design.questions(s, m), design.conditions(s, m)
        reqs = design.requests(s, m, qs, conds)
        for i, member in enumerate(ensemble(cfg, s)):
            name = design.member_name(member, i)
            cached: CachedBackend = ctx.backends.sampler(member)
            results = cached.sample(reqs, desc=f"choir {name}")
            members_audit.append(
                {"name": name, "identity": cached.backend.identity, "identity_digest": cached.digest}
            )
            for r, res in zip(reqs, results, strict=True):
                for g, raw in enumerate(res.texts):
                    reason = res.refusal(g)
                    if reason is not None:  # no list: counted, never read as an empty one
                        rows.append(_refused_row(name, r.meta, r.temperature, g, reason))
                    else:
                        rows.append(_list_row(name, r.meta, r.temperature, g, raw, s.items_per_list))
    extraction = None
    if s.extractor.kind == "llm":
        from lmaudit.studies.choir.llm_extract import extract_rows

        model = OmegaConf.to_container(cfg.study.extractor.model, resolve=True) if s.extractor.model else None
        if model is not None and not isinstance(model, dict):
            raise InputError(
                "study: field 'extractor.model' must be a model config (as conf/model/*.yaml) or null"
            )
        sampler = ctx.backends.sampler({str(k): v for k, v in model.items()} if model else cfg.model)
        extraction = extract_rows(
            rows, sampler, s.items_per_list, s.extractor.max_tokens, s.extractor.on_invalid
        )
        extraction["identity"] = sampler.backend.identity
    pairs = [
        {"kind": "cue_pair", "original": p.original, "stripped": p.id, "anchors": list(p.anchors)}
        for p in design.cue_pairs(s, m)
    ]
    vocab = {q: question_words(t) for q, t in sorted(texts_of.items())}
    used = {r["persona"] for r in rows} - {NO_PERSONA}
    profile_text = {p.id: p.text or "" for p in m.personas} | profiles
    pvocab = {p: question_words(profile_text[p]) for p in sorted(used) if p in profile_text}
    coded = any(r.get("coded") for r in rows)  # hand-coded import: no embedding, no clustering
    texts = (
        []
        if coded
        else sorted(
            {it["text"] for r in rows for it in r.get("items", ())}
            | {w for ws in vocab.values() for w in ws}
            | {w for ws in pvocab.values() for w in ws}
            | {a for p in pairs for a in p["anchors"]}
            | set(calibration_texts(load_calibration(s.echo_calibration_path or CALIBRATION_PATH)[0]))
        )
    )
    emb = ctx.backends.embedder(OmegaConf.to_container(cfg.study.embedder, resolve=True))  # type: ignore[arg-type]
    vectors = emb.embed(texts, desc="choir embeddings") if texts else np.zeros((0, 1), dtype=np.float32)
    rows += [{"kind": "vocabulary", "question": q, "terms": ws} for q, ws in vocab.items()]
    rows += [{"kind": "profile_vocabulary", "persona": p, "terms": ws} for p, ws in sorted(pvocab.items())]
    rows += pairs
    rows.append({"kind": "embedder", "identity": emb.identity, "identity_digest": emb.digest})
    if s.calibration_path:
        rows += read_calibration(s.calibration_path)
    mode = ranking_mode(s)
    if mode == "import":
        rows += read_ballots(str(s.ranking.import_path))
    elif mode == "elicit":
        lists = [r for r in rows if r["kind"] == "list"]
        vec = dict(zip(texts, vectors, strict=True))
        more, ranking_audit = measure_ranking(s, m, lists, vec, texts_of, _evaluators(cfg, s), ctx.backends)
        rows += more
    rows += [
        {"kind": "embedding", "text": t, "vector": _vector_text(v)}
        for t, v in zip(texts, vectors, strict=True)
    ]
    audit: dict[str, Any] = {
        "ensemble": members_audit,
        "embedder": emb.identity,
        "ranking": mode,
        "extraction": extraction,
    }
    if mode == "elicit":
        audit["evaluators"] = ranking_audit
    if extraction is not None:
        rows.append({"kind": "extractor", **extraction})
    return Measured(rows + log_rows, audit=audit)


@register_study
class ChoirStudy(Study):
    """Free-list elicitation across model ensembles (seed 003)."""

    name = "choir"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_questions", "n_models", "above_chance", "above_chance_significant", "lift_up")
    config = ChoirStudyConfig
    groups: ClassVar[Mapping[str, type]] = {"ensemble": ChoirEnsembleConfig}
    measured_groups = ("ensemble",)  # its members are the models measured
    compare_columns: ClassVar[tuple[tuple[str, ...], ...]] = COMPARE_COLUMNS
    data_keys = (
        "config.study.import_path",
        "inputs.import",
        "config.study.ranking.import_path",
        "inputs.ballots",
        "config.study.calibration_path",
        "inputs.calibration",
        "config.study.profiles_path",
        "inputs.profiles",
        "config.study.codebook_path",
        "inputs.codebook",
    )
    has_yaml = True

    def default_run_name(self, cfg: DictConfig) -> str:
        s = settings(cfg)
        if s.import_path:
            return f"import-{Path(s.import_path).stem}"
        members = [str(m["name"]) for m in ensemble(cfg, s)]
        names = "+".join(members)
        if len(names) > 48:  # a long ensemble: its first member, its size, a digest of all names
            tag = hashlib.sha256(names.encode()).hexdigest()[:6]
            names = f"{members[0]}+{len(members) - 1}more-{tag}"
        return f"{s.bank}-{s.ensemble.name}-{names}-g{s.generations}"

    def plan_config(self, cfg: DictConfig) -> dict[str, Any]:
        out = super().plan_config(cfg)
        # the import's format is a fact of the data, recorded under inputs.import (a data key);
        # an unset import temperature leaves the plans made before it existed as they were
        out["study"].pop("import_format", None)
        if out["study"].get("import_temperature") is None:
            out["study"].pop("import_temperature", None)
        # how the embedder runs (runner, devices ...) is not part of the design either
        out["study"]["embedder"] = without_execution(out["study"].get("embedder"), EMBEDDER_EXECUTION_FIELDS)
        return out

    def plan(self, ctx: RunContext) -> Plan:
        return plan(ctx.cfg, freezing_open=ctx.freezing_open)

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        return measure(ctx.cfg, ctx)

    def needs_backend(self, cfg: DictConfig) -> bool:
        return False  # every member (and the embedder) is opened through ctx.backends

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        return self.result(analyze_rows(cfg, measurements.rows, measurements.source))

    headline = staticmethod(headline)  # type: ignore[assignment]
    metrics = staticmethod(metrics)  # type: ignore[assignment]
    tags = staticmethod(tags)  # type: ignore[assignment]
    summary = staticmethod(summary)  # type: ignore[assignment]

    def report(self, result: StudyResult, ctx: RunContext) -> str:
        from lmaudit.reporting.page import read_rows
        from lmaudit.studies.choir.report.page import render_report  # matplotlib: when used

        audit = dict(ctx.audit)
        rows = read_rows(audit, ctx.run_dir)
        return render_report(result.results, ctx.plan.doc if ctx.plan else None, audit, rows)

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        return plot_data(result.results)

    def design_key(self, cfg: DictConfig) -> str | None:
        return sweep.design_key(cfg)

    def combine_sweep(self, cfgs: list[DictConfig], run_dirs: list[Path], out: Path) -> DictConfig:
        try:
            return sweep.combine_sweep(cfgs, run_dirs, out)
        except InputError as e:
            raise NotCombinable(str(e)) from None
