"""The source-blind ranking module (appendix D): evaluator cohorts rank candidates drawn from the
four pools (:mod:`.pools`) without seeing their source (stage 1); Borda scoring with
concept-family collapse picks each pool's finalists, and each cohort ranks the finalist sets,
still source-blind (stage 2, :mod:`.finalists`); the pool each cohort advances is compared between
the cohorts.

Measure (after elicitation and embedding; the codebook is a deterministic function of them):
the pools of each question are drawn; every evaluator (a model config, any backend) ranks each
question's candidates once without a system turn (the *unconditioned cohort*) and once under
each persona of ``ranking.personas`` as the system turn (the *conditioned cohort*), ``replicates``
times, each ballot with its own recorded shuffle. The finalists follow from the stage-1 answers
(per cohort, or pooled: ``ranking.finalists_from``), and every evaluator then ranks the finalist
sets in each cohort's turns the same way. Every ballot asks through the cached sampling contract;
its stage, prompt, raw answer, parsed ranking and candidates (with their hidden pools, sources
and families) are measurement records, so the analysis is a pure function of them.

The Borda rules and the analysis of the ballots are in :mod:`.borda`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.backends.base import SampleRequest
from lmaudit.errors import InputError
from lmaudit.studies.base import BackendProvider
from lmaudit.studies.choir.ballots import (
    COHORTS,
    labels_for,
    parse_ranking,
    render_prompt,
    render_sets_prompt,
)
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.data import NO_PERSONA, ChoirMaterials
from lmaudit.studies.choir.design import member_name
from lmaudit.studies.choir.finalists import select_finalists
from lmaudit.studies.choir.pools import build_pools, source_of
from lmaudit.studies.choir.records import ListRecord
from lmaudit.studies.choir.tally import borda

__all__ = [
    "ballot_requests",
    "evaluators",
    "finalist_sets",
    "measure_ranking",
    "ranking_mode",
    "set_requests",
]


def _seed(seed: int, *parts: object) -> int:
    h = hashlib.sha256(":".join(str(p) for p in (seed, *parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


def _turns(s: ChoirStudyConfig, m: ChoirMaterials) -> list[tuple[str, str, tuple[dict[str, str], ...]]]:
    """(cohort, persona, system turn) of every ballot round: none, then each persona."""
    r = s.ranking
    personas = {p.id: p for p in m.personas}
    cohort_personas = list(dict.fromkeys(s.personas if r.personas is None else r.personas))
    bad = [p for p in cohort_personas if p not in personas or p == NO_PERSONA]
    if bad:
        raise InputError(f"study: field 'ranking.personas': {bad} are not persona profiles")
    return [("unconditioned", NO_PERSONA, ())] + [
        ("conditioned", p, ({"role": "system", "content": str(personas[p].text)},)) for p in cohort_personas
    ]


def _request(
    s: ChoirStudyConfig, system: tuple[dict[str, str], ...], prompt: str, seed: int, meta: dict[str, Any]
) -> tuple[list[dict[str, str]], SampleRequest]:
    messages = (*system, {"role": "user", "content": prompt})
    req = SampleRequest(
        messages=messages,
        n=1,
        temperature=float(s.ranking.temperature),
        top_p=1.0,
        max_tokens=s.ranking.max_tokens,
        seed=seed,
        meta=meta,
    )
    return list(messages), req


def _ballot(
    stage: int,
    question: str,
    cohort: str,
    evaluator: str,
    persona: str,
    replicate: int,
    order_seed: int,
    **fields: Any,
) -> dict[str, Any]:
    """A ballot record without its answer: who ranks what at which stage, then the stage's
    ``fields`` in the order given."""
    return {
        "kind": "ballot",
        "stage": stage,
        "question": question,
        "cohort": cohort,
        "evaluator": evaluator,
        "persona": persona,
        "replicate": replicate,
        "order_seed": order_seed,
        **fields,
    }


def ballot_requests(
    s: ChoirStudyConfig,
    m: ChoirMaterials,
    pool_rows: Sequence[Mapping[str, Any]],
    question_texts: Mapping[str, str],
    evaluator: str,
) -> list[tuple[dict[str, Any], SampleRequest]]:
    """One evaluator's stage-1 ballots: (the ballot record without its answer, the request)."""
    r = s.ranking
    turns = _turns(s, m)
    out = []
    for row in pool_rows:
        q, cands = str(row["question"]), list(row["candidates"])
        if len(cands) < 2:
            continue  # nothing to rank (recorded in the pool record)
        labels = labels_for(len(cands))
        for cohort, persona, system in turns:
            for rep in range(r.replicates):
                order_seed = _seed(r.seed, "order", q, evaluator, persona, rep)
                perm = np.random.default_rng(order_seed).permutation(len(cands)).tolist()
                shown = [{"label": lab, **cands[i]} for lab, i in zip(labels, perm, strict=True)]
                prompt = render_prompt(r.prompt, question_texts[q], [c["text"] for c in shown])
                meta = {
                    "kind": "ranking",
                    "question": q,
                    "persona": persona,
                    "candidates": [{k: c[k] for k in ("label", "source", "pool", "text")} for c in shown],
                }
                messages, req = _request(
                    s, system, prompt, _seed(r.seed, "request", q, evaluator, persona, rep), meta
                )
                record = _ballot(
                    1, q, cohort, evaluator, persona, rep, order_seed, prompt=messages, candidates=shown
                )
                out.append((record, req))
    return out


def finalist_sets(
    s: ChoirStudyConfig, pool_rows: Sequence[Mapping[str, Any]], stage1: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (question, cohort): the finalist sets chosen from the valid stage-1 ballots (the cohort's
    own, or both cohorts' with ``finalists_from: pooled``) and the pools whose cut fell in a tie."""
    out = {}
    for row in pool_rows:
        q = str(row["question"])
        info = {str(c["id"]): c for c in row["candidates"]}
        family = {c: str(v["family"]) for c, v in info.items()}
        for cohort in COHORTS:
            rankings = [
                [ids[x] for x in b["parsed"]["ranking"]]
                for b in stage1
                if b["question"] == q
                and b["parsed"]["valid"]
                and (s.ranking.finalists_from == "pooled" or b["cohort"] == cohort)
                for ids in [{c["label"]: str(c["id"]) for c in b["candidates"]}]
            ]
            if not rankings:
                continue
            sel = select_finalists(borda(rankings, family), info, s.ranking.finalists)
            sets = [
                {
                    "pool": p,
                    "source": source_of(p),
                    "finalists": [{k: info[c][k] for k in ("id", "text", "family")} for c in ids],
                }
                for p, ids in sel["finalists"].items()
            ]
            if len(sets) >= 2:
                out[(q, cohort)] = {"sets": sets, "cut_ties": sel["cut_ties"]}
    return out


def set_requests(
    s: ChoirStudyConfig,
    m: ChoirMaterials,
    finalists: Mapping[tuple[str, str], Mapping[str, Any]],
    question_texts: Mapping[str, str],
    evaluator: str,
) -> list[tuple[dict[str, Any], SampleRequest]]:
    """One evaluator's stage-2 ballots: each cohort's finalist sets, shuffled (sets and the texts
    within a set) by a recorded seed, in that cohort's turns."""
    r = s.ranking
    out = []
    for (q, cohort), fin in finalists.items():
        labels = labels_for(len(fin["sets"]))
        for turn_cohort, persona, system in _turns(s, m):
            if turn_cohort != cohort:
                continue
            for rep in range(r.replicates):
                order_seed = _seed(r.seed, "order-finalists", q, evaluator, persona, rep)
                rng = np.random.default_rng(order_seed)
                shown = []
                for lab, i in zip(labels, rng.permutation(len(fin["sets"])).tolist(), strict=True):
                    st = fin["sets"][i]
                    texts = [st["finalists"][j] for j in rng.permutation(len(st["finalists"])).tolist()]
                    shown.append({"label": lab, **st, "finalists": texts})
                prompt = render_sets_prompt(
                    r.finalist_prompt, question_texts[q], [[f["text"] for f in c["finalists"]] for c in shown]
                )
                meta = {
                    "kind": "finalists",
                    "question": q,
                    "persona": persona,
                    "candidates": [
                        {k: c[k] for k in ("label", "source", "pool")}
                        | {"texts": [f["text"] for f in c["finalists"]]}
                        for c in shown
                    ],
                }
                seed = _seed(r.seed, "request-finalists", q, evaluator, persona, rep)
                messages, req = _request(s, system, prompt, seed, meta)
                record = _ballot(
                    2,
                    q,
                    cohort,
                    evaluator,
                    persona,
                    rep,
                    order_seed,
                    finalists_from=r.finalists_from,
                    cut_ties=fin["cut_ties"],
                    prompt=messages,
                    candidates=shown,
                )
                out.append((record, req))
    return out


def _ask(
    evaluators: Sequence[Mapping[str, Any]],
    backends: BackendProvider,
    specs_for: Callable[[str], list[tuple[dict[str, Any], SampleRequest]]],
    stage: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    out, audit = [], []
    for i, ev in enumerate(evaluators):
        name = member_name(dict(ev), i)
        specs = specs_for(name)
        cached = backends.sampler(ev)
        answers = cached.sample([req for _, req in specs], desc=f"choir ranking stage {stage} {name}")
        audit.append({"name": name, "identity": cached.backend.identity, "identity_digest": cached.digest})
        for (rec, _), res in zip(specs, answers, strict=True):
            raw = res.texts[0]
            labels = [c["label"] for c in rec["candidates"]]
            parsed = parse_ranking(raw, labels, noun="set" if stage == 2 else None)
            out.append({**rec, "raw": raw, "parsed": parsed.to_json()})
    return out, audit


def measure_ranking(
    s: ChoirStudyConfig,
    m: ChoirMaterials,
    list_rows: Sequence[Mapping[str, Any]],
    vectors: Mapping[str, NDArray[np.float32]],
    question_texts: Mapping[str, str],
    evaluators: Sequence[Mapping[str, Any]],
    backends: BackendProvider,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pool records and every evaluator's ballots of both stages (asked through the cache), and an audit list."""
    recs: dict[str, list[ListRecord]] = {}
    for r in list_rows:
        recs.setdefault(str(r["question"]), []).append(ListRecord.from_row(r))
    qs = sorted(recs) if s.ranking.question_ids is None else list(s.ranking.question_ids)
    unknown = [q for q in qs if q not in recs]
    if unknown:
        raise InputError(f"study: field 'ranking.question_ids': {unknown} have no lists")
    pool_rows = [build_pools(q, recs[q], vectors, s) for q in qs]
    stage1, audit = _ask(
        evaluators, backends, lambda e: ballot_requests(s, m, pool_rows, question_texts, e), 1
    )
    fin = finalist_sets(s, pool_rows, stage1)
    stage2, _ = _ask(evaluators, backends, lambda e: set_requests(s, m, fin, question_texts, e), 2)
    return [*pool_rows, *stage1, *stage2], audit


def ranking_mode(s: ChoirStudyConfig) -> str | None:
    """How the source-blind ranking runs: ``import`` (ballots recorded elsewhere), ``elicit``
    (the evaluators rank), or None (off; ``enabled: null`` means on when the ensemble lists evaluators)."""
    if s.ranking.import_path:
        return "import"
    if s.ranking.enabled is False:
        return None
    return "elicit" if s.ranking.enabled or s.ensemble.evaluators else None


def evaluators(given: Any, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evaluators' model configs (``ensemble.evaluators``; none given: the members)."""
    if not given:
        return members
    if not isinstance(given, list):
        raise InputError("study: field 'ensemble.evaluators' must be a list of model configs")
    for i, e in enumerate(given):
        if not isinstance(e, dict) or "backend" not in e:
            raise InputError(
                f"study: field 'ensemble.evaluators[{i}]' must be a model config with 'backend' and 'name'"
            )
        member_name(e, i)
    names = [e["name"] for e in given]
    if len(set(names)) != len(names):
        raise InputError(f"study: field 'ensemble.evaluators': names must be distinct, got {names}")
    return [{str(k): v for k, v in e.items()} for e in given]
