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
from dataclasses import replace
from typing import Any

from lmaudit.errors import InputError
from lmaudit.studies.choir.ballots import COHORTS, Parsed, check_ranking, parse_ranking
from lmaudit.studies.choir.finalists import read_set_ballot, set_outcome, top_finalist
from lmaudit.studies.choir.results.ranking import (
    BordaRow,
    ByStage,
    Candidate,
    Cohort,
    CohortCount,
    CohortDecided,
    Cohorts,
    Count,
    InvalidBallot,
    PoolDraw,
    Ranking,
    RankingQuestion,
    RankingSummary,
    Stage1,
    Stage2,
    StageCount,
)
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


def _candidate(info: Mapping[str, Any]) -> Candidate:
    return Candidate(
        id=str(info["id"]),
        text=str(info["text"]),
        pool=str(info["pool"]),
        source=str(info["source"]),
        family=str(info["family"]),
    )


def stage1(
    rankings: Sequence[Sequence[str]], info: Mapping[str, Mapping[str, Any]], n_ballots: int
) -> tuple[Stage1, Borda]:
    """A cohort's stage-1 Borda over its valid rankings (candidate ids, of ``n_ballots``
    ballots) and its leader."""
    family = {c: str(v["family"]) for c, v in info.items()}
    b = borda(rankings, family)
    top_f, tie = _top_family(b)
    if top_f is None:
        return Stage1(n_valid=len(rankings), n_ballots=n_ballots, leader=None, top_family=None, tie=False), b
    in_f = [c for c in b.candidate_points if family[c] == top_f]
    top_c = min(in_f, key=lambda c: (-b.candidate_points[c], -b.candidate_firsts.get(c, 0), c))
    pools: dict[str, list[int]] = {}
    for c, v in info.items():
        pools.setdefault(str(v["pool"]), []).append(b.candidate_points.get(c, 0))
    rows = [BordaRow(id=c, family=family[c], points=b.candidate_points.get(c, 0)) for c in info]
    return Stage1(
        n_valid=len(rankings),
        n_ballots=n_ballots,
        leader=_candidate(info[top_c]),  # ties broken (first places, id)
        top_family=top_f,
        top_points=b.family_points[top_f],
        tie=tie,
        pool_points_per_ballot={p: sum(v) / len(rankings) for p, v in sorted(pools.items())},
        borda=tuple(sorted(rows, key=lambda r: (-r.points, r.id))),
    ), b


def _undecided(s1: Stage1, s2: Stage2 | None) -> Cohort:
    return Cohort(stage1=s1, stage2=s2, decided_by=None, advanced_pool=None, advanced_source=None, tie=False)


def _cohort(q: Mapping[str, Any], cohort: str, info: Mapping[str, Mapping[str, Any]]) -> Cohort:
    s1, b = stage1(q["valid"][(1, cohort)], info, q["n"][(1, cohort)])
    sets = q["sets"][cohort]
    if q["n"][(2, cohort)]:  # the finalist stage ran: it decides (or, with no valid ballot, nothing does)
        rankings = q["valid"][(2, cohort)]
        so = set_outcome(rankings, {p: v["source"] for p, v in sets.items()})
        s2 = Stage2(
            n_ballots=q["n"][(2, cohort)],
            n_valid=len(rankings),
            finalists={p: tuple(f["id"] for f in v["finalists"]) for p, v in sets.items()},
            set_points=so["set_points"],
            set_firsts=so["set_firsts"],
        )
        if not rankings:
            return _undecided(s1, s2)
        pool = so["advanced_pool"]
        top: Candidate | None = None
        if pool is None:
            status = "advanced pool tied"
        else:
            fin = {f["id"]: f for f in sets[pool]["finalists"]}
            top_id, status = top_finalist(list(fin), b)
            if top_id is not None:
                top = _candidate(
                    info[top_id]
                    if top_id in info
                    else {**fin[top_id], "pool": pool, "source": sets[pool]["source"]}
                )
        return CohortDecided(
            stage1=s1,
            stage2=s2,
            decided_by="finalists",
            advanced_pool=pool,
            advanced_source=so["advanced_source"],
            tie=so["tie"],
            tied_pools=tuple(so["tied_pools"]),
            top=top,
            top_status=status,
        )
    if not s1.n_valid:
        return _undecided(s1, None)
    tie, lead = s1.tie, s1.leader
    assert lead is not None  # a valid ballot names a leader
    return CohortDecided(
        stage1=s1,
        stage2=None,
        decided_by="stage1",
        advanced_pool=None if tie else lead.pool,
        advanced_source=None if tie else lead.source,
        tie=tie,
        top=None if tie else lead,
        top_status="tie" if tie else "ok",
    )


def _count(flags: list[bool], **extra: Any) -> dict[str, Any]:
    return {"count": sum(flags), "n": len(flags), "share": sum(flags) / len(flags) if flags else None} | extra


_NO_TOP = ("no stage-1 ballots", "no finalists")  # undecidable, not a tie


def _agree(cohorts: Cohorts, key: str) -> bool | None:
    """Whether both cohorts' tops share ``key``; None when either cohort is undecided or has no
    stage-1 ranking to pick its top from; a tie (advanced pool or top finalist) is disagreement."""
    decided = [cohorts[c] for c in COHORTS]
    tops: list[Candidate | None] = []
    for o in decided:
        if not isinstance(o, CohortDecided) or o.top_status in _NO_TOP:
            return None
        tops.append(o.top)
    a, b = tops
    return a is not None and b is not None and getattr(a, key) == getattr(b, key)


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
) -> Ranking | None:
    """Pure: ballot (and pool) records in, the results' ``ranking`` section out (None: no ballots)."""
    if not ballots:
        return None
    by_q: dict[str, dict[str, Any]] = {}
    errors: Counter[str] = Counter()
    by_stage: dict[int, Counter[str]] = {s: Counter() for s in (1, 2)}
    invalid: list[InvalidBallot] = []
    completed = 0
    for i, row in enumerate(ballots, start=1):
        parsed, stage, ids, q = _read(row, i, source, by_q)
        by_stage[stage]["n_ballots"] += 1
        if not parsed.valid:
            errors[str(parsed.error)] += 1
            by_stage[stage]["n_invalid"] += 1
            if len(invalid) < 20:
                invalid.append(
                    InvalidBallot(
                        question=row.get("question"),
                        cohort=str(row["cohort"]),  # conditioned | unconditioned (_read checks it)
                        evaluator=row.get("evaluator"),
                        persona=row.get("persona"),
                        replicate=row.get("replicate"),
                        stage=stage,
                        error=parsed.error,
                        raw=str(row.get("raw"))[:300],
                    )
                )
            continue
        completed += parsed.completed
        q["valid"][(stage, row["cohort"])].append([ids[x] for x in parsed.ranking])
    questions: dict[str, RankingQuestion] = {}
    for qid in sorted(by_q):
        q = by_q[qid]
        info = {k: {**v, "id": k} for k, v in sorted(q["info"].items())}
        cohorts = Cohorts(
            conditioned=_cohort(q, "conditioned", info), unconditioned=_cohort(q, "unconditioned", info)
        )
        questions[qid] = RankingQuestion(
            n_candidates=len(info),
            candidates=tuple(_candidate(v) for v in info.values()),
            cohorts=cohorts,
            agree_top=_agree(cohorts, "id"),
            agree_family=_agree(cohorts, "family"),
        )
    for p in pools:
        qid = str(p["question"])
        where = f"{source}: the ranking_pool record of question {qid!r}"
        raw = p.get("pools")
        drawn = (
            None
            if raw is None
            else {k: PoolDraw.from_json(v, f"{where}, pool {k!r}") for k, v in raw.items()}
        )
        known = questions.get(qid)
        questions[qid] = (
            RankingQuestion(n_candidates=0, cohorts=None, agree_top=None, agree_family=None, pools=drawn)
            if known is None
            else replace(known, pools=drawn)
        )
    n_invalid = sum(errors.values())
    decided = [v.cohorts for v in questions.values() if v.cohorts]
    cohort_counts = {}
    for cohort in COHORTS:
        outs = [c[cohort] for c in decided if c[cohort].decided_by]
        cohort_counts[cohort] = CohortCount(
            **_count([o.advanced_source == "conditioned" for o in outs]),
            ties=sum(bool(o.tie) for o in outs),
            decided_by=dict(sorted(Counter(str(o.decided_by) for o in outs).items())),
        )
    agreed = [v for v in questions.values() if v.agree_top is not None]
    ties = sum(
        any(not isinstance(o := v.cohorts[c], CohortDecided) or o.top_status != "ok" for c in COHORTS)
        for v in agreed
        if v.cohorts
    )
    summary = RankingSummary(
        n_questions=len(questions),
        n_ballots=len(ballots),
        n_valid=len(ballots) - n_invalid,
        n_invalid=n_invalid,
        n_completed=completed,
        invalid_by_error=dict(sorted(errors.items())),
        by_stage=ByStage(
            stage1=StageCount(n_ballots=by_stage[1]["n_ballots"], n_invalid=by_stage[1]["n_invalid"]),
            stage2=StageCount(n_ballots=by_stage[2]["n_ballots"], n_invalid=by_stage[2]["n_invalid"]),
        ),
        conditioned_cohort=cohort_counts["conditioned"],
        unconditioned_cohort=cohort_counts["unconditioned"],
        agree_top=Count(**_count([bool(v.agree_top) for v in agreed]), ties=ties),
        agree_family=Count(
            **_count([bool(v.agree_family) for v in questions.values() if v.agree_family is not None])
        ),
    )
    return Ranking(summary=summary, questions=questions, invalid_examples=tuple(invalid))


def cohort_tops(ranking: Ranking | None) -> list[dict[str, Any]]:
    """The cohorts' top candidates as calibration ``cohort_top`` records (appendix D.1)."""
    out = []
    for q, v in ranking.questions.items() if ranking else ():
        for c in COHORTS:
            o = v.cohorts[c] if v.cohorts else None
            if isinstance(o, CohortDecided) and o.top:
                out.append({"kind": "calibration_cohort_top", "cohort": c, "question": q, "item": o.top.text})
    return out
