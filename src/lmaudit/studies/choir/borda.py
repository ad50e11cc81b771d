"""The analysis of the source-blind ranking's ballots (appendix D): pure functions from ballot
records to the results' ``ranking`` section.

Borda with family collapse, per ballot: walking the ranking best first, a candidate whose
family (codebook concept) has already appeared earns nothing; the ``F`` distinct families get
``F - 1, F - 2, ..., 0`` points in the order they first appear, and each family's points are
credited to the candidate that carried its best rank. Per question and cohort the family with
the most points is the cohort's top family (ties: more first places, then the family id); its
candidate with the most credited points is the *top candidate* (ties: more first places, then
the id), and the pool it was drawn from is the cohort's *advanced pool*.

Summary counts (the seed's "11/12, 8/12, 7/12"): for each cohort, the questions whose advanced
pool is conditioned-source out of the questions where the cohort has a valid ballot; the
questions where both cohorts' top candidates are the same candidate (and the same family) out of
those where both have one. Invalid ballots are counted by the rule they broke and never scored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lmaudit.provenance.io import InputError
from lmaudit.studies.choir.ballots import COHORTS, Parsed, check_ranking, parse_ranking

__all__ = ["Borda", "analyze_ranking", "borda", "cohort_tops", "read_ballot"]


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


@dataclass(frozen=True)
class Borda:
    family_points: dict[str, int]
    candidate_points: dict[str, int]  # each family's points, credited to its best-ranked candidate
    family_firsts: dict[str, int]
    candidate_firsts: dict[str, int]
    n_ballots: int


def borda(rankings: Sequence[Sequence[str]], family: Mapping[str, str]) -> Borda:
    """Borda with concept-family collapse over rankings of candidate ids (best first)."""
    fp: Counter[str] = Counter()
    cp: Counter[str] = Counter()
    ff: Counter[str] = Counter()
    cf: Counter[str] = Counter()
    for ranking in rankings:
        best: dict[str, str] = {}
        for c in ranking:
            best.setdefault(family[c], c)
        n = len(best)
        for pos, (f, c) in enumerate(best.items()):
            fp[f] += n - 1 - pos
            cp[c] += n - 1 - pos
            if pos == 0:
                ff[f] += 1
                cf[c] += 1
    return Borda(dict(fp), dict(cp), dict(ff), dict(cf), len(rankings))


def _top_family(b: Borda) -> tuple[str | None, bool]:
    """The family with the most points (ties: more first places, then the id); whether tied on points."""
    fams = sorted(b.family_points, key=lambda f: (-b.family_points[f], -b.family_firsts.get(f, 0), f))
    if not fams:
        return None, False
    return fams[0], len(fams) > 1 and b.family_points[fams[0]] == b.family_points[fams[1]]


def _cohort(
    rankings: list[list[str]], info: Mapping[str, Mapping[str, Any]], n_ballots: int
) -> dict[str, Any]:
    family = {c: str(v["family"]) for c, v in info.items()}
    b = borda(rankings, family)
    top_f, tie = _top_family(b)
    out: dict[str, Any] = {"n_ballots": n_ballots, "n_valid": len(rankings)}
    if top_f is None:
        return {**out, "top": None, "top_family": None, "advanced_pool": None, "advanced_source": None}
    in_f = [c for c in b.candidate_points if family[c] == top_f]
    top_c = min(in_f, key=lambda c: (-b.candidate_points[c], -b.candidate_firsts.get(c, 0), c))
    pools: dict[str, list[int]] = {}
    for c, v in info.items():
        pools.setdefault(str(v["pool"]), []).append(b.candidate_points.get(c, 0))
    return {
        **out,
        "top": {k: info[top_c][k] for k in ("id", "text", "pool", "source", "family")},
        "top_family": top_f,
        "top_points": b.family_points[top_f],
        "tie": tie,
        "advanced_pool": info[top_c]["pool"],
        "advanced_source": info[top_c]["source"],
        "pool_points_per_ballot": {p: sum(v) / len(rankings) for p, v in sorted(pools.items()) if rankings},
        "borda": sorted(
            ({"id": c, "family": family[c], "points": b.candidate_points.get(c, 0)} for c in info),
            key=lambda r: (-r["points"], r["id"]),
        ),
    }


def _count(flags: list[bool]) -> dict[str, Any]:
    return {"count": sum(flags), "n": len(flags), "share": sum(flags) / len(flags) if flags else None}


def analyze_ranking(
    ballots: Sequence[Mapping[str, Any]], pools: Sequence[Mapping[str, Any]], source: str
) -> dict[str, Any] | None:
    """Pure: ballot (and pool) records in, the results' ``ranking`` section out (None: no ballots)."""
    if not ballots:
        return None
    by_q: dict[str, dict[str, Any]] = {}
    errors: Counter[str] = Counter()
    invalid: list[dict[str, Any]] = []
    completed = 0
    for i, row in enumerate(ballots, start=1):
        where = f"{source}: ballot {i} (question {row.get('question')!r}, evaluator {row.get('evaluator')!r})"
        if row.get("cohort") not in COHORTS:
            raise InputError(
                f"{where}: field 'cohort' = {row.get('cohort')!r} is not conditioned or unconditioned"
            )
        parsed, cands = read_ballot(row, where)
        q = by_q.setdefault(
            str(row["question"]), {"info": {}, "valid": {c: [] for c in COHORTS}, "n": Counter()}
        )
        for c in cands:
            known = q["info"].setdefault(c["id"], c)
            if any(known[k] != c[k] for k in ("text", "pool", "source", "family")):
                raise InputError(f"{where}: candidate {c['id']!r} differs from its earlier ballots")
        q["n"][row["cohort"]] += 1
        if not parsed.valid:
            errors[str(parsed.error)] += 1
            if len(invalid) < 20:
                invalid.append(
                    {k: row.get(k) for k in ("question", "cohort", "evaluator", "persona", "replicate")}
                    | {"error": parsed.error, "raw": str(row.get("raw"))[:300]}
                )
            continue
        completed += parsed.completed
        ids = {c["label"]: c["id"] for c in cands}
        q["valid"][row["cohort"]].append([ids[x] for x in parsed.ranking])
    questions: dict[str, Any] = {}
    for qid in sorted(by_q):
        q = by_q[qid]
        info = {k: {**v, "id": k} for k, v in sorted(q["info"].items())}
        cohorts = {c: _cohort(q["valid"][c], info, q["n"][c]) for c in COHORTS}
        tops = [cohorts[c]["top"] for c in COHORTS]
        questions[qid] = {
            "n_candidates": len(info),
            "candidates": [
                {k: v[k] for k in ("id", "text", "pool", "source", "family")} for v in info.values()
            ],
            "cohorts": cohorts,
            "agree_top": None if None in tops else tops[0]["id"] == tops[1]["id"],
            "agree_family": None if None in tops else tops[0]["family"] == tops[1]["family"],
        }
    pool_info = {str(p["question"]): p.get("pools") for p in pools}
    for qid, p in pool_info.items():
        questions.setdefault(
            qid, {"n_candidates": 0, "cohorts": None, "agree_top": None, "agree_family": None}
        )
        questions[qid]["pools"] = p
    n_valid = sum(len(v) for q in by_q.values() for v in q["valid"].values())
    summary = {
        "n_questions": len(questions),
        "n_ballots": len(ballots),
        "n_valid": n_valid,
        "n_invalid": len(ballots) - n_valid,
        "n_completed": completed,
        "invalid_by_error": dict(sorted(errors.items())),
    }
    for cohort in COHORTS:
        flags = [
            v["cohorts"][cohort]["advanced_source"] == "conditioned"
            for v in questions.values()
            if v["cohorts"] and v["cohorts"][cohort]["top"] is not None
        ]
        summary[f"{cohort}_cohort"] = _count(flags)
    summary["agree_top"] = _count([v["agree_top"] for v in questions.values() if v["agree_top"] is not None])
    summary["agree_family"] = _count(
        [v["agree_family"] for v in questions.values() if v["agree_family"] is not None]
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
