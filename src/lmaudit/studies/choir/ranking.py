"""The source-blind ranking module (appendix D): evaluator cohorts rank candidates drawn from the
four pools (:mod:`.pools`) without seeing their source; Borda scoring with concept-family
collapse picks each cohort's top candidate, and the pool it came from is compared between the
cohorts.

Measure (after elicitation and embedding; the codebook is a deterministic function of them):
the pools of each question are drawn; every evaluator (a model config, any backend) ranks each
question's candidates once without a system turn (the *unconditioned cohort*) and once under
each persona of ``ranking.personas`` as the system turn (the *conditioned cohort*), ``replicates``
times, each ballot with its own recorded shuffle. Every ballot asks through the cached sampling
contract; its prompt, raw answer, parsed ranking and candidates (with their hidden pools, sources
and families) are measurement records, so the analysis below is a pure function of them.

The Borda rules and the analysis of the ballots are in :mod:`.borda`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.backends.base import SampleRequest
from lmaudit.provenance.io import InputError
from lmaudit.studies.base import BackendProvider
from lmaudit.studies.choir.ballots import labels_for, parse_ranking, render_prompt
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.data import NO_PERSONA, ChoirMaterials
from lmaudit.studies.choir.design import member_name
from lmaudit.studies.choir.pools import build_pools
from lmaudit.studies.choir.records import ListRecord

__all__ = ["ballot_requests", "evaluators", "measure_ranking", "ranking_mode"]


def _seed(seed: int, *parts: object) -> int:
    h = hashlib.sha256(":".join(str(p) for p in (seed, *parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


def ballot_requests(
    s: ChoirStudyConfig,
    m: ChoirMaterials,
    pool_rows: Sequence[Mapping[str, Any]],
    question_texts: Mapping[str, str],
    evaluator: str,
) -> list[tuple[dict[str, Any], SampleRequest]]:
    """One evaluator's ballots: (the ballot record without its answer, the request)."""
    r = s.ranking
    personas = {p.id: p for p in m.personas}
    cohort_personas = list(dict.fromkeys(s.personas if r.personas is None else r.personas))
    bad = [p for p in cohort_personas if p not in personas or p == NO_PERSONA]
    if bad:
        raise InputError(f"study: field 'ranking.personas': {bad} are not persona profiles")
    out = []
    for row in pool_rows:
        q, cands = str(row["question"]), list(row["candidates"])
        if len(cands) < 2:
            continue  # nothing to rank (recorded in the pool record)
        labels = labels_for(len(cands))
        for cohort, persona in [("unconditioned", NO_PERSONA)] + [
            ("conditioned", p) for p in cohort_personas
        ]:
            for rep in range(r.replicates):
                order_seed = _seed(r.seed, "order", q, evaluator, persona, rep)
                perm = np.random.default_rng(order_seed).permutation(len(cands)).tolist()
                shown = [{"label": lab, **cands[i]} for lab, i in zip(labels, perm, strict=True)]
                prompt = render_prompt(r.prompt, question_texts[q], [c["text"] for c in shown])
                system = (
                    ()
                    if persona == NO_PERSONA
                    else ({"role": "system", "content": str(personas[persona].text)},)
                )
                messages = (*system, {"role": "user", "content": prompt})
                req = SampleRequest(
                    messages=messages,
                    n=1,
                    temperature=float(r.temperature),
                    top_p=1.0,
                    max_tokens=r.max_tokens,
                    seed=_seed(r.seed, "request", q, evaluator, persona, rep),
                    meta={
                        "kind": "ranking",
                        "question": q,
                        "persona": persona,
                        "candidates": [{k: c[k] for k in ("label", "source", "pool", "text")} for c in shown],
                    },
                )
                record = {
                    "kind": "ballot",
                    "question": q,
                    "cohort": cohort,
                    "evaluator": evaluator,
                    "persona": persona,
                    "replicate": rep,
                    "order_seed": order_seed,
                    "prompt": list(messages),
                    "candidates": shown,
                }
                out.append((record, req))
    return out


def measure_ranking(
    s: ChoirStudyConfig,
    m: ChoirMaterials,
    list_rows: Sequence[Mapping[str, Any]],
    vectors: Mapping[str, NDArray[np.float32]],
    question_texts: Mapping[str, str],
    evaluators: Sequence[Mapping[str, Any]],
    backends: BackendProvider,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pool records and every evaluator's ballots (asked through the cache), and an audit list."""
    recs: dict[str, list[ListRecord]] = {}
    for r in list_rows:
        recs.setdefault(str(r["question"]), []).append(
            ListRecord(
                str(r["model"]),
                str(r["question"]),
                str(r["condition"]),
                str(r["persona"]),
                float(r["temperature"]),
                int(r["generation"]),
                tuple(str(it["text"]) for it in r["items"]),
            )
        )
    qs = sorted(recs) if s.ranking.question_ids is None else list(s.ranking.question_ids)
    unknown = [q for q in qs if q not in recs]
    if unknown:
        raise InputError(f"study: field 'ranking.question_ids': {unknown} have no lists")
    pool_rows = [build_pools(q, recs[q], vectors, s) for q in qs]
    out: list[dict[str, Any]] = list(pool_rows)
    audit = []
    for i, ev in enumerate(evaluators):
        name = member_name(dict(ev), i)
        specs = ballot_requests(s, m, pool_rows, question_texts, name)
        cached = backends.sampler(ev)
        answers = cached.sample([req for _, req in specs], desc=f"choir ranking {name}")
        audit.append({"name": name, "identity": cached.backend.identity, "identity_digest": cached.digest})
        for (rec, _), res in zip(specs, answers, strict=True):
            raw = res.texts[0]
            parsed = parse_ranking(raw, [c["label"] for c in rec["candidates"]])
            out.append({**rec, "raw": raw, "parsed": parsed.to_json()})
    return out, audit


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
