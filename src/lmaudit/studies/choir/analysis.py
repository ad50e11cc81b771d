"""The choir analysis from measurement records: parse and check every record of a measurement
file (lists, embeddings, vocabularies, cue pairs, ballots, calibration, the extractor's and the
embedder's records), then run the pure analysis (:mod:`.lists`), the ranking and the
calibration on them, and return the typed results (:class:`.results.ChoirResults`)."""

from __future__ import annotations

import base64
from collections import Counter
from typing import Any

import numpy as np
from numpy.typing import NDArray
from omegaconf import DictConfig

from lmaudit.errors import InputError
from lmaudit.interop.audit import AUDIT_KIND, check_audit_row, log_audit_section
from lmaudit.studies.base import typed
from lmaudit.studies.choir.borda import analyze_ranking, cohort_tops
from lmaudit.studies.choir.calibration import analyze_calibration
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.results import ChoirResults, Design, LlmExtraction, RefusedLists, RuleExtraction

__all__ = ["analyze_rows"]


def _vector(text: str, where: str) -> NDArray[np.float32]:
    try:
        return np.frombuffer(base64.b64decode(text, validate=True), dtype="<f4").astype(np.float32)
    except (ValueError, TypeError):
        raise InputError(f"{where}: field 'vector' is not base64 float32") from None


def analyze_rows(cfg: DictConfig, rows: list[dict[str, Any]], source: str) -> ChoirResults:
    from lmaudit.studies.choir.lists import ListRecord, analyze_lists  # scipy, scikit-learn: when used

    s = typed(cfg.study, ChoirStudyConfig)
    assert isinstance(s, ChoirStudyConfig)
    recs: list[ListRecord] = []
    vec: dict[str, NDArray[np.float32]] = {}
    vocab: dict[str, list[str]] = {}
    pvocab: dict[str, list[str]] = {}
    calibration: list[dict[str, Any]] = []
    ballots: list[dict[str, Any]] = []
    pools: list[dict[str, Any]] = []
    embedder = None
    extractor: dict[str, Any] = {}  # an extractor record's (none: extracted by rule)
    cue_pairs: list[dict[str, Any]] = []
    refused: Counter[str] = Counter()
    degenerate = 0  # items extraction dropped as degenerate repetitions
    audits: list[dict[str, Any]] = []
    for i, r in enumerate(rows, start=1):
        where = f"{source}: record {i}"
        kind = r.get("kind") if isinstance(r, dict) else None
        if kind == "list":
            try:
                recs.append(ListRecord.from_row(r))
                degenerate += int((r.get("extraction") or {}).get("degenerate", 0))
            except (KeyError, TypeError, ValueError) as e:
                raise InputError(
                    f"{where}: a list record needs model, question, condition, persona, "
                    f"temperature, generation and items[].text ({e})"
                ) from None
        elif kind == "refused_list":  # the server answered without a list: counted only
            refused[str(r.get("refusal")).split(":")[0]] += 1
        elif kind == "embedding":
            vec[str(r.get("text"))] = _vector(str(r.get("vector")), where)
        elif kind == "vocabulary":
            vocab[str(r.get("question"))] = [str(t) for t in r.get("terms", [])]
        elif kind == "profile_vocabulary":
            pvocab[str(r.get("persona"))] = [str(t) for t in r.get("terms", [])]
        elif kind == "embedder":
            embedder = r.get("identity")
        elif kind == "cue_pair":
            try:
                cue_pairs.append(
                    {
                        "original": str(r["original"]),
                        "stripped": str(r["stripped"]),
                        "anchors": list(r["anchors"]),
                    }
                )
            except (KeyError, TypeError) as e:
                raise InputError(
                    f"{where}: a cue_pair record needs original, stripped and anchors ({e})"
                ) from None
        elif kind == "extractor":
            extractor = {
                k: r.get(k) for k in ("lists", "distinct_answers", "invalid", "on_invalid", "identity")
            }
        elif isinstance(kind, str) and kind.startswith("calibration_"):
            calibration.append(r)
        elif kind == "ballot":
            ballots.append(r)
        elif kind == "ranking_pool":
            pools.append(r)
        elif kind == AUDIT_KIND:  # an imported log's settings and issues (docs/interop.md)
            audits.append(check_audit_row(r, where))
        else:
            raise InputError(
                f"{where}: field 'kind' = {kind!r} is not list, refused_list, embedding, vocabulary, profile_vocabulary, "
                "embedder, extractor, cue_pair, ballot, ranking_pool, log_audit or calibration_*"
            )
    missing = sorted(
        (
            {t for r in recs for t in r.items}
            | {w for ws in [*vocab.values(), *pvocab.values()] for w in ws}
            | {a for p in cue_pairs for a in p["anchors"]}
        )
        - set(vec)
        if not recs or any(r.concepts is None for r in recs)
        else set()  # hand-coded lists: nothing is embedded
    )
    if missing:
        raise InputError(
            f"{source}: {len(missing)} item texts have no embedding record (e.g. {missing[0]!r})"
        )
    if not recs:
        why = f" (the server refused all {sum(refused.values())} lists)" if refused else ""
        raise InputError(f"{source}: no list records to analyse{why}")
    out = analyze_lists(recs, vec, vocab, s, pvocab, cue_pairs, degenerate)
    ranking = analyze_ranking(ballots, pools, source)
    design = Design(
        models=tuple(sorted({r.model for r in recs})),
        questions=len({r.question for r in recs}),
        conditions=tuple(sorted({r.condition for r in recs})),
        lists=len(recs),
        empty_lists=sum(1 for r in recs if not r.items),
        degenerate_items=degenerate,
        refused_lists=RefusedLists(n=sum(refused.values()), reasons=dict(sorted(refused.items()))),
        extraction=(
            LlmExtraction.from_json({"method": "llm", **extractor}, f"{source}: the extractor record")
            if extractor
            else RuleExtraction(method="rule")
        ),
    )
    return ChoirResults(
        design=design,
        embedder=embedder,
        **out.sections(),
        ranking=ranking,
        calibration=analyze_calibration(calibration, cohort_tops(ranking)),
        log_audit=log_audit_section(audits, f"{source}: log_audit rows") if audits else None,
    )
