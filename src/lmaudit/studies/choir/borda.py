"""The analysis of the source-blind ranking's ballots (appendix D): pure functions from ballot
records to the results' ``ranking`` section.

Borda with family collapse (stage 1, :mod:`.tally`) scores each cohort's ballots. From it each
pool's finalists are chosen
(:mod:`.finalists`), and each cohort's stage-2 ballots over the finalist sets decide its
*advanced pool* and, within it, its *top candidate* (by the cohort's own stage-1 points).

A cohort with no stage-2 ballot on a question (ballots recorded as one round only) is decided by
its stage-1 Borda instead, and marked ``decided_by: stage1``: the family with the most points is
the top family, its candidate with the most credited points (ties: more first places, then the
id) the top candidate, and that candidate's pool the advanced pool.

Ties count against the claims: a tie for the most points (stage-2 sets; stage-1 families in the
one-round case) leaves no advanced pool (not conditioned-source) and no top candidate; a tie for
the top finalist leaves no top candidate (the cohorts do not agree). Ties are recorded.

Summary counts (the seed's "11/12, 8/12, 7/12"): for each cohort, the questions whose advanced
pool is conditioned-source out of the questions the cohort decided (it has a valid ballot of the
deciding stage); the questions where both cohorts' top candidates are the same candidate (and the
same family) out of those both decided. Invalid ballots are counted by the rule they broke and
never scored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from lmaudit.errors import InputError
from lmaudit.studies.choir.ballots import COHORTS, Parsed, check_ranking, parse_ranking
from lmaudit.studies.choir.finalists import read_set_ballot, set_outcome, top_finalist
from lmaudit.studies.choir.tally import Borda, borda

__all__ = ["analyze_ranking", "cohort_tops", "read_ballot"]


def read_ballot(row: Mapping[str, Any], where: str) -> tuple[Parsed, list[dict[str, Any]]]:
    """A ballot record's parsed ranking (raw re-read by rule, or the given labels) and candidates."""
    try:
        cands = [
            {"label": str(c["label"]), "text": str(c["text"]), "id": str(c["id"])}
            | {"pool": str(c["pool"]), "source": str(c["source"]), "family": str(c["family"])}
            for c in row["candidates"]
        ]
    except (KeyError, TypeError):
        raise InputError(
            f"{where}: a ballot needs candidates[] with label, id, text, pool, source and family"
        ) from None
    labels = [c["label"] for c in cands]
    if row.get("raw") is not None:
        return parse_ranking(row["raw"], labels), cands
    given = row.get("ranking")
    if not isinstance(given, list):
        raise InputError(f"{where}: a ballot needs 'raw' or 'ranking'")
    return check_ranking([str(x) for x in given], labels), cands


def _top_family(b: Borda) -> tuple[str | None, bool]:
    """The family with the most points (ties: more first places, then the id); whether tied on points."""
    fams = sorted(b.family_points, key=lambda f: (-b.family_points[f], -b.family_firsts.get(f, 0), f))
    if not fams:
        return None, False
    return fams[0], len(fams) > 1 and b.family_points[fams[0]] == b.family_points[fams[1]]


_TOP = ("id", "text", "pool", "source", "family")


def stage1(
    rankings: Sequence[Sequence[str]], info: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, Any], Borda]:
    """A cohort's stage-1 Borda over its valid rankings (candidate ids) and its leader."""
    family = {c: str(v["family"]) for c, v in info.items()}
    b = borda(rankings, family)
    top_f, tie = _top_family(b)
    out: dict[str, Any] = {"n_valid": len(rankings)}
    if top_f is None:
        return {**out, "leader": None, "top_family": None, "tie": False}, b
    in_f = [c for c in b.candidate_points if family[c] == top_f]
    top_c = min(in_f, key=lambda c: (-b.candidate_points[c], -b.candidate_firsts.get(c, 0), c))
    pools: dict[str, list[int]] = {}
    for c, v in info.items():
        pools.setdefault(str(v["pool"]), []).append(b.candidate_points.get(c, 0))
    return {
        **out,
        "leader": {k: info[top_c][k] for k in _TOP},  # ties broken (first places, id)
        "top_family": top_f,
        "top_points": b.family_points[top_f],
        "tie": tie,
        "pool_points_per_ballot": {p: sum(v) / len(rankings) for p, v in sorted(pools.items())},
        "borda": sorted(
            ({"id": c, "family": family[c], "points": b.candidate_points.get(c, 0)} for c in info),
            key=lambda r: (-r["points"], r["id"]),
        ),
    }, b


def _cohort(q: Mapping[str, Any], cohort: str, info: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    s1, b = stage1(q["valid"][(1, cohort)], info)
    s1["n_ballots"] = q["n"][(1, cohort)]
    out: dict[str, Any] = {"stage1": s1, "stage2": None}
    sets = q["sets"][cohort]
    if q["n"][(2, cohort)]:  # the finalist stage ran: it decides (or, with no valid ballot, nothing does)
        rankings = q["valid"][(2, cohort)]
        so = set_outcome(rankings, {p: v["source"] for p, v in sets.items()})
        out["stage2"] = {
            "n_ballots": q["n"][(2, cohort)],
            "n_valid": len(rankings),
            "finalists": {p: [f["id"] for f in v["finalists"]] for p, v in sets.items()},
            "set_points": so["set_points"],
            "set_firsts": so["set_firsts"],
        }
        if not rankings:
            return {**out, "decided_by": None, "advanced_pool": None, "advanced_source": None, "tie": False}
        pool = so["advanced_pool"]
        out |= {"decided_by": "finalists", "advanced_pool": pool, "advanced_source": so["advanced_source"]}
        out |= {"tie": so["tie"], "tied_pools": so["tied_pools"]}
        if pool is None:
            return {**out, "top": None, "top_status": "advanced pool tied"}
        fin = {f["id"]: f for f in sets[pool]["finalists"]}
        top_id, status = top_finalist(list(fin), b)
        top = None if top_id is None else {**fin[top_id], "pool": pool, "source": sets[pool]["source"]}
        if top_id is not None and top_id in info:
            top = {k: info[top_id][k] for k in _TOP}
        return {**out, "top": top, "top_status": status}
    if not s1["n_valid"]:
        return {**out, "decided_by": None, "advanced_pool": None, "advanced_source": None, "tie": False}
    tie, lead = bool(s1["tie"]), s1["leader"]
    return {
        **out,
        "decided_by": "stage1",
        "advanced_pool": None if tie else lead["pool"],
        "advanced_source": None if tie else lead["source"],
        "tie": tie,
        "top": None if tie else lead,
        "top_status": "tie" if tie else "ok",
    }


def _count(flags: list[bool]) -> dict[str, Any]:
    return {"count": sum(flags), "n": len(flags), "share": sum(flags) / len(flags) if flags else None}


_NO_TOP = ("no stage-1 ballots", "no finalists")  # undecidable, not a tie


def _agree(cohorts: Mapping[str, Mapping[str, Any]], key: str) -> bool | None:
    """Whether both cohorts' tops share ``key``; None when either cohort is undecided or has no
    stage-1 ranking to pick its top from; a tie (advanced pool or top finalist) is disagreement."""
    if any(cohorts[c].get("decided_by") is None or cohorts[c].get("top_status") in _NO_TOP for c in COHORTS):
        return None
    tops = [cohorts[c]["top"] for c in COHORTS]
    return None not in tops and tops[0][key] == tops[1][key]


def _read(
    row: Mapping[str, Any], i: int, source: str, by_q: dict[str, Any]
) -> tuple[Parsed, int, dict[str, str], Any]:
    where = f"{source}: ballot {i} (question {row.get('question')!r}, evaluator {row.get('evaluator')!r})"
    cohort, stage = row.get("cohort"), row.get("stage", 1)
    if cohort not in COHORTS:
        raise InputError(f"{where}: field 'cohort' = {cohort!r} is not conditioned or unconditioned")
    if stage not in (1, 2) or isinstance(stage, bool):
        raise InputError(f"{where}: field 'stage' = {stage!r} is not 1 or 2")
    q = by_q.setdefault(
        str(row["question"]),
        {
            "info": {},
            "sets": {c: {} for c in COHORTS},
            "valid": {(s, c): [] for s in (1, 2) for c in COHORTS},
            "n": Counter(),
        },
    )
    if stage == 1:
        parsed, cands = read_ballot(row, where)
        for c in cands:
            known = q["info"].setdefault(c["id"], c)
            if any(known[k] != c[k] for k in ("text", "pool", "source", "family")):
                raise InputError(f"{where}: candidate {c['id']!r} differs from its earlier ballots")
        ids = {c["label"]: c["id"] for c in cands}
    else:
        parsed, sets = read_set_ballot(row, where)
        for st in sets:
            fin = sorted(st["finalists"], key=lambda f: f["id"])  # each ballot shows its own order
            body = {"source": st["source"], "finalists": fin}
            if q["sets"][cohort].setdefault(st["pool"], body) != body:
                raise InputError(
                    f"{where}: the set of pool {st['pool']!r} differs from the cohort's earlier stage-2 ballots"
                )
        ids = {c["label"]: c["pool"] for c in sets}
    q["n"][(stage, cohort)] += 1
    return parsed, stage, ids, q


def analyze_ranking(
    ballots: Sequence[Mapping[str, Any]], pools: Sequence[Mapping[str, Any]], source: str
) -> dict[str, Any] | None:
    """Pure: ballot (and pool) records in, the results' ``ranking`` section out (None: no ballots)."""
    if not ballots:
        return None
    by_q: dict[str, dict[str, Any]] = {}
    errors: Counter[str] = Counter()
    by_stage: dict[int, Counter[str]] = {s: Counter() for s in (1, 2)}
    invalid: list[dict[str, Any]] = []
    completed = 0
    for i, row in enumerate(ballots, start=1):
        parsed, stage, ids, q = _read(row, i, source, by_q)
        by_stage[stage]["n_ballots"] += 1
        if not parsed.valid:
            errors[str(parsed.error)] += 1
            by_stage[stage]["n_invalid"] += 1
            if len(invalid) < 20:
                invalid.append(
                    {k: row.get(k) for k in ("question", "cohort", "evaluator", "persona", "replicate")}
                    | {"stage": stage, "error": parsed.error, "raw": str(row.get("raw"))[:300]}
                )
            continue
        completed += parsed.completed
        q["valid"][(stage, row["cohort"])].append([ids[x] for x in parsed.ranking])
    questions: dict[str, Any] = {}
    for qid in sorted(by_q):
        q = by_q[qid]
        info = {k: {**v, "id": k} for k, v in sorted(q["info"].items())}
        cohorts = {c: _cohort(q, c, info) for c in COHORTS}
        questions[qid] = {
            "n_candidates": len(info),
            "candidates": [{k: v[k] for k in _TOP} for v in info.values()],
            "cohorts": cohorts,
            "agree_top": _agree(cohorts, "id"),
            "agree_family": _agree(cohorts, "family"),
        }
    for p in pools:
        qid = str(p["question"])
        questions.setdefault(
            qid, {"n_candidates": 0, "cohorts": None, "agree_top": None, "agree_family": None}
        )
        questions[qid]["pools"] = p.get("pools")
    n_invalid = sum(errors.values())
    summary: dict[str, Any] = {
        "n_questions": len(questions),
        "n_ballots": len(ballots),
        "n_valid": len(ballots) - n_invalid,
        "n_invalid": n_invalid,
        "n_completed": completed,
        "invalid_by_error": dict(sorted(errors.items())),
        "by_stage": {
            f"stage{s}": {"n_ballots": c["n_ballots"], "n_invalid": c["n_invalid"]}
            for s, c in by_stage.items()
        },
    }
    decided = [v for v in questions.values() if v["cohorts"]]
    for cohort in COHORTS:
        outs = [v["cohorts"][cohort] for v in decided if v["cohorts"][cohort]["decided_by"]]
        summary[f"{cohort}_cohort"] = _count([o["advanced_source"] == "conditioned" for o in outs])
        summary[f"{cohort}_cohort"]["ties"] = sum(bool(o["tie"]) for o in outs)
        summary[f"{cohort}_cohort"]["decided_by"] = dict(
            sorted(Counter(o["decided_by"] for o in outs).items())
        )
    for key in ("agree_top", "agree_family"):
        summary[key] = _count([v[key] for v in questions.values() if v[key] is not None])
    summary["agree_top"]["ties"] = sum(
        any(v["cohorts"][c].get("top_status") != "ok" for c in COHORTS)
        for v in questions.values()
        if v["agree_top"] is not None
    )
    return {"summary": summary, "questions": questions, "invalid_examples": invalid}


def cohort_tops(ranking: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The cohorts' top candidates as calibration ``cohort_top`` records (appendix D.1)."""
    out = []
    for q, v in ((ranking or {}).get("questions") or {}).items():
        for c in COHORTS:
            top = ((v.get("cohorts") or {}).get(c) or {}).get("top")
            if top:
                out.append(
                    {"kind": "calibration_cohort_top", "cohort": c, "question": q, "item": top["text"]}
                )
    return out
