"""Judging through the cache: independent judgments (fresh context), the shared-context
deviation, strict parsing with retries, and the log-prob readout at the verdict position.

Every judgment is one sampling request with ``n = 1`` and its own seed,
``judgment_seed(study seed, condition, prompt, replicate, attempt)``, so a judgment does not
depend on which other conditions share the job: a single-condition job and the all-conditions
job ask the identical requests, and the response cache (keyed by judge identity, request, seed
and draw) serves one job's judgments to the other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from lmaudit.backends.base import LabelRequest, Message, SampleRequest
from lmaudit.backends.cached import CachedBackend
from lmaudit.errors import BackendError, InputError
from lmaudit.provenance.digest import json_digest
from lmaudit.provenance.measured_model import MeasuredModel
from lmaudit.studies.base import Measured, Plan
from lmaudit.studies.judge.freeze import result_artifacts
from lmaudit.studies.judge.importer import import_rows, import_source
from lmaudit.studies.judge.packets import (
    Candidate,
    Condition,
    JudgeText,
    Sampling,
    judge_messages,
    load_candidates,
)
from lmaudit.studies.judge.parse import parse_verdict
from lmaudit.studies.judge.planning import conditions, judge_text, sampling, settings

__all__ = [
    "Judging",
    "Sampling",
    "judgment_seed",
    "measure",
    "measure_fresh",
    "measure_shared",
    "readout_rows",
]


def judgment_seed(seed: int, condition: str, prompt_id: str, replicate: int, attempt: int) -> int:
    """A judgment's seed (63-bit), stable across processes, platforms and condition sets."""
    h = hashlib.sha256(f"{seed}:{condition}:{prompt_id}:{replicate}:{attempt}".encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


def _meta(cond: Condition, c: Candidate, replicate: int, attempt: int) -> dict[str, Any]:
    # what a sim judge may read: never the model mapping
    return {
        "item": c.prompt_id,
        "condition": cond.id,
        "swap": cond.swap,
        "wrap": sorted(cond.wrap),
        "replicate": replicate,
        "attempt": attempt,
    }


def _original(winner: str | None, swap: bool) -> str | None:
    """A displayed winner label in the candidates' original A/B orientation."""
    if winner is None or not swap or winner == "TIE":
        return winner
    return "B" if winner == "A" else "A"


def _row(
    cond: Condition,
    c: Candidate,
    replicate: int,
    attempt: int,
    req: SampleRequest,
    raw: str,
    isolation: str,
    max_attempts: int,
) -> dict[str, Any]:
    """One attempt's judgment row; ``final`` when its verdict is valid or no attempt is left."""
    v = parse_verdict(raw)
    return {
        "kind": "judgment",
        "source": "judged",
        "condition": cond.id,
        "item": c.prompt_id,
        "replicate": replicate,
        "attempt": attempt,
        "final": v.valid or attempt == max_attempts - 1,
        "seed": req.seed,
        "swap": cond.swap,
        "wrap": sorted(cond.wrap),
        "isolation": isolation,
        "messages_sha256": json_digest(list(req.messages)),
        "raw": v.raw,
        "valid": v.valid,
        "error": v.error,
        "winner": v.winner,
        "winner_original": _original(v.winner, cond.swap),
        "confidence": v.confidence,
        "reason": v.reason,
    }


def _request(messages: Sequence[Message], s: Sampling, seed: int, meta: dict[str, Any]) -> SampleRequest:
    return SampleRequest(
        messages=tuple(messages),
        n=1,
        temperature=s.temperature,
        top_p=s.top_p,
        max_tokens=s.max_tokens,
        seed=seed,
        meta=meta,
    )


Prompts = dict[tuple[str, str, int], tuple[Message, ...]]


@dataclass(frozen=True)
class Judging:
    """What a judge run asks: every condition's packet of every candidate, ``k`` times, with
    the sampling settings; :func:`measure_fresh` and :func:`measure_shared` are the two ways
    (``study.isolation``) of asking it."""

    conds: Sequence[Condition]
    cands: Sequence[Candidate]
    text: JudgeText
    sampling: Sampling


def measure_fresh(job: Judging, cached: CachedBackend) -> tuple[list[dict[str, Any]], Prompts]:
    """Every judgment an independent request with no shared history; invalid ones are retried
    (a new request with the next attempt's seed) up to ``max_attempts``; every attempt is a row."""
    conds, cands, text, s = job.conds, job.cands, job.text, job.sampling
    pending = [(cond, c, r) for cond in conds for c in cands for r in range(s.k)]
    prompts: Prompts = {(cond.id, c.prompt_id, r): judge_messages(c, cond, text) for cond, c, r in pending}
    rows: list[dict[str, Any]] = []
    for attempt in range(s.max_attempts):
        if not pending:
            break
        reqs = [
            _request(
                prompts[(cond.id, c.prompt_id, r)],
                s,
                judgment_seed(s.seed, cond.id, c.prompt_id, r, attempt),
                _meta(cond, c, r, attempt),
            )
            for cond, c, r in pending
        ]
        results = cached.sample(reqs, desc=f"judging (attempt {attempt + 1})")
        still = []
        for (cond, c, r), req, res in zip(pending, reqs, results, strict=True):
            row = _row(cond, c, r, attempt, req, res.texts[0], "fresh", s.max_attempts)
            rows.append(row)
            if not row["final"]:
                still.append((cond, c, r))
        pending = still
    return rows, prompts


def measure_shared(job: Judging, cached: CachedBackend) -> tuple[list[dict[str, Any]], Prompts]:
    """The shared-context deviation: per replicate, one conversation that judges every
    condition's packet in order, each turn seeing all earlier prompts and verdicts. Kept only
    to reproduce executions that did this; the study records it as a deviation."""
    conds, cands, text, s = job.conds, job.cands, job.text, job.sampling
    rows: list[dict[str, Any]] = []
    prompts: Prompts = {}
    for r in range(s.k):
        history: list[Message] = []
        turns: list[dict[str, Any]] = []
        for cond in conds:
            for c in cands:
                msgs = judge_messages(c, cond, text)
                head = [m for m in msgs if m["role"] == "system"] if not history else []
                user = [m for m in msgs if m["role"] != "system"]
                for attempt in range(s.max_attempts):
                    meta = {**_meta(cond, c, r, attempt), "history": list(turns)}
                    seed = judgment_seed(s.seed, cond.id, c.prompt_id, r, attempt)
                    req = _request([*history, *head, *user], s, seed, meta)
                    prompts[(cond.id, c.prompt_id, r)] = req.messages
                    raw = cached.sample([req], progress=False)[0].texts[0]
                    row = _row(cond, c, r, attempt, req, raw, "shared", s.max_attempts)
                    row["turn"] = len(turns)
                    rows.append(row)
                    if row["final"]:
                        break
                history += [*head, *user, {"role": "assistant", "content": raw}]
                turns.append({"item": c.prompt_id, "condition": cond.id, "swap": cond.swap})
    return rows, prompts


def resolve_readout_labels(
    labels: dict[str, str], check: Callable[[LabelRequest], dict[str, list[str]]], probe: LabelRequest
) -> tuple[dict[str, str], dict[str, Any]]:
    """The text scored for each verdict: the configured label when it is one token after the
    rendered prompt, else its shortest prefix that is exactly the label's first token (e.g.
    ``TIE`` read as ``T`` where ``TIE`` is two tokens), so the three first tokens stay distinct."""
    wanted = [labels[v] for v in ("A", "B", "TIE")]
    pieces = check(LabelRequest(messages=probe.messages, labels=tuple(wanted), meta=probe.meta))
    out: dict[str, str] = {}
    notes: dict[str, Any] = {"pieces": pieces}
    for verdict, label in zip(("A", "B", "TIE"), wanted, strict=True):
        p = pieces[label]
        if len(p) == 1:
            out[verdict] = label
            continue
        for n in range(1, len(label)):
            got = check(LabelRequest(messages=probe.messages, labels=(label[:n],), meta=probe.meta))
            if got[label[:n]] == p[:1]:
                out[verdict] = label[:n]
                notes[verdict] = f"{label!r} is {len(p)} tokens; its first token {label[:n]!r} is scored"
                break
        else:
            raise InputError(f"study.readout_labels: {label!r} has no single-token prefix ({p})")
    if len(set(out.values())) != 3:
        raise InputError(f"study.readout_labels: the scored labels {out} are not distinct")
    return out, notes


def readout_rows(
    judged: Sequence[dict[str, Any]],
    prompts: Prompts,
    conds: dict[str, Condition],
    text: JudgeText,
    labels: dict[str, str],
    cached: CachedBackend,
    top_k: int,
    check: Callable[[LabelRequest], dict[str, list[str]]],
) -> list[dict[str, Any]]:
    """P(A), P(B), P(TIE) at the verdict position: the next-token probabilities after the judge
    prompt plus the readout turn (one per distinct prompt: per replicate only in shared context)."""
    keys = sorted({(r["condition"], r["item"], r["replicate"]) for r in judged}, key=str)
    unique: dict[str, tuple[tuple[str, str, int], tuple[Message, ...]]] = {}
    for key in keys:
        msgs = (*prompts[key], {"role": "user", "content": text.readout_turn})
        unique.setdefault(json_digest(list(msgs)), (key, msgs))
    if not unique:
        return []
    items = list(unique.values())
    reqs = []
    for (cid, item, _rep), msgs in items:
        meta = {"item": item, "condition": cid, "swap": conds[cid].swap, "wrap": sorted(conds[cid].wrap)}
        reqs.append(LabelRequest(messages=msgs, labels=("A", "B", "TIE"), meta=meta))
    scored, notes = resolve_readout_labels(labels, check, reqs[0])
    reqs = [
        LabelRequest(messages=q.messages, labels=tuple(scored[v] for v in ("A", "B", "TIE")), meta=q.meta)
        for q in reqs
    ]
    res = cached.label_logprobs(reqs, top_k, desc="readout")
    shared = any(r["isolation"] == "shared" for r in judged)
    rows = []
    for ((cid, item, rep), _), q, out in zip(items, reqs, res, strict=True):
        probs = {v: out.probs[scored[v]] for v in ("A", "B", "TIE")}
        aligned = dict(probs)
        if conds[cid].swap:
            aligned = {"A": probs["B"], "B": probs["A"], "TIE": probs["TIE"]}
        rows.append(
            {
                "kind": "readout",
                "condition": cid,
                "item": item,
                "replicate": rep if shared else None,
                "swap": conds[cid].swap,
                "labels": scored,
                "label_notes": notes,
                "probs": probs,
                "probs_original": aligned,
                "other": out.other,
                "top_k": [[t, p] for t, p in out.top_k],
                "messages_sha256": json_digest(list(q.messages)),
            }
        )
    return rows


def measure(
    cfg: DictConfig, the_plan: Plan, cached: CachedBackend | None, model: MeasuredModel | None = None
) -> Measured:
    """Judge every condition's packet (or read the import); the pipeline has frozen the
    protocol (:func:`protocol_artifacts`) before this is called. ``model``: the judge as the
    pipeline resolved it (its name and identity digest)."""
    s = settings(cfg)
    conds, _ = conditions(cfg)
    src = import_source(s)
    if src is not None:
        return Measured(import_rows(src, conds))
    if cached is None or model is None:
        raise InputError("study judge: judging needs a backend (study.import_path is not set)")
    backend = cached.backend
    samp = sampling(s)
    text = judge_text(cfg)
    cands = load_candidates(s.candidates_path, s.prompt_ids)
    job = Judging(conds, cands, text, samp)
    rows, prompts = measure_fresh(job, cached) if s.isolation == "fresh" else measure_shared(job, cached)
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
        "judge": {"name": model.name, "identity_digest": model.digest},
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
    judge = {"name": model.name, "identity_digest": model.digest}
    all_rows = [design, *rows, *readout]
    return Measured(all_rows, artifacts=result_artifacts(all_rows, the_plan.doc, judge))
