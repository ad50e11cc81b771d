"""Measuring the choir design: every ensemble member's lists (or lists recorded elsewhere) with
their concept items (:mod:`.extract`, or :mod:`.llm_extract`), the embeddings of every distinct
item and question-vocabulary term, and, with the source-blind ranking on, the evaluators'
ballots (:mod:`.ranking`, or ballots recorded elsewhere). The measurement file holds them all,
so the analysis is a pure function of it."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from omegaconf import DictConfig, OmegaConf

from lmaudit.backends.cached import CachedBackend
from lmaudit.errors import InputError
from lmaudit.studies.base import Measured, RunContext
from lmaudit.studies.choir import design
from lmaudit.studies.choir.ballots import read_ballots
from lmaudit.studies.choir.calibration import read_calibration
from lmaudit.studies.choir.data import NO_PERSONA, load_profiles
from lmaudit.studies.choir.echo import CALIBRATION_PATH, calibration_texts, load_calibration
from lmaudit.studies.choir.extract import extract_items
from lmaudit.studies.choir.foreign import foreign_lists, log_import
from lmaudit.studies.choir.importer import read_import
from lmaudit.studies.choir.planning import ensemble, evaluator_models, settings
from lmaudit.studies.choir.ranking import measure_ranking, ranking_mode
from lmaudit.text import question_words

__all__ = ["measure"]


def _vector_text(v: NDArray[np.float32]) -> str:
    return base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")


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
        more, ranking_audit = measure_ranking(
            s, m, lists, vec, texts_of, evaluator_models(cfg, s), ctx.backends
        )
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
