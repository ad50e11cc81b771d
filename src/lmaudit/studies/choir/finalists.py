"""The finalist stage of the source-blind ranking (appendix D: "finalist pools are compared
source-blind by independent conditioned and unconditioned evaluator cohorts").

Stage 1 ranks the candidates of all four pools (:mod:`.borda`). From its family-collapsed Borda,
each pool's *finalists* are its best ``finalists`` candidates: the pool's candidates by credited
points (ties: more first places, then the id), a candidate whose family already has a finalist in
the pool passed over. Stage 2 shows each pool's finalists as one set (``Set A``, ``Set B``, ...,
sources hidden) and each cohort ranks the sets. Plain Borda over a cohort's stage-2 ballots
(``S`` sets score ``S - 1, ..., 0``) gives its *advanced pool*: the set with the most points; a
tie on points has no advanced pool (it counts against "conditioned-source advanced", and is
recorded). The cohort's *top candidate* is the advanced pool's finalist with the most points in
the cohort's own stage-1 Borda (a tie on points: no top candidate; it counts against agreement).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from lmaudit.errors import InputError
from lmaudit.studies.choir.ballots import Parsed, check_ranking, parse_ranking
from lmaudit.studies.choir.pools import POOLS
from lmaudit.studies.choir.tally import Borda

__all__ = ["read_set_ballot", "select_finalists", "set_outcome", "top_finalist"]


def select_finalists(b: Borda, info: Mapping[str, Mapping[str, Any]], per_pool: int) -> dict[str, Any]:
    """Each pool's finalists (ids, best first) from a stage-1 Borda (:func:`.tally.borda`), and the
    pools whose cut fell inside a tie on points (broken by first places, then the id)."""
    family = {c: str(v["family"]) for c, v in info.items()}
    by_pool: dict[str, list[str]] = {}
    for c in sorted(info):
        by_pool.setdefault(str(info[c]["pool"]), []).append(c)
    out: dict[str, list[str]] = {}
    cut_ties = []
    for pool, cands in by_pool.items():
        order = sorted(cands, key=lambda c: (-b.candidate_points.get(c, 0), -b.candidate_firsts.get(c, 0), c))
        chosen: list[str] = []
        fams: set[str] = set()
        rest: list[str] = []
        for c in order:
            if family[c] in fams:
                continue
            fams.add(family[c])
            (chosen if len(chosen) < per_pool else rest).append(c)
        out[pool] = chosen
        if rest and chosen and b.candidate_points.get(rest[0], 0) == b.candidate_points.get(chosen[-1], 0):
            cut_ties.append(pool)
    order = sorted(out, key=lambda p: (POOLS.index(p) if p in POOLS else len(POOLS), p))
    return {"finalists": {p: out[p] for p in order if out[p]}, "cut_ties": sorted(cut_ties)}


def read_set_ballot(row: Mapping[str, Any], where: str) -> tuple[Parsed, list[dict[str, Any]]]:
    """A stage-2 ballot's parsed ranking (raw re-read by rule, or the given labels) and its sets."""
    try:
        sets: list[dict[str, Any]] = [
            {"label": str(c["label"]), "pool": str(c["pool"]), "source": str(c["source"])}
            | {"finalists": [{k: str(f[k]) for k in ("id", "text", "family")} for f in c["finalists"]]}
            for c in row["candidates"]
        ]
    except (KeyError, TypeError):
        raise InputError(
            f"{where}: a stage-2 ballot needs candidates[] with label, pool, source and finalists "
            "(each id, text and family)"
        ) from None
    labels = [str(c["label"]) for c in sets]
    if row.get("raw") is not None:
        return parse_ranking(row["raw"], labels, noun="set"), sets
    given = row.get("ranking")
    if not isinstance(given, list):
        raise InputError(f"{where}: a ballot needs 'raw' or 'ranking'")
    return check_ranking([str(x) for x in given], labels), sets


def set_outcome(rankings: Sequence[Sequence[str]], sources: Mapping[str, str]) -> dict[str, Any]:
    """Plain Borda over stage-2 rankings of pools: points, first places and the advanced pool (None
    on a tie for the most points, the tied pools recorded)."""
    points: Counter[str] = Counter({p: 0 for p in sources})
    firsts: Counter[str] = Counter()
    for r in rankings:
        for pos, p in enumerate(r):
            points[p] += len(r) - 1 - pos
        if r:
            firsts[r[0]] += 1
    best = max(points.values()) if points else 0
    leaders = sorted(p for p, v in points.items() if v == best)
    tie = len(leaders) > 1
    return {
        "set_points": dict(sorted(points.items())),
        "set_firsts": dict(sorted(firsts.items())),
        "advanced_pool": None if tie or not leaders else leaders[0],
        "advanced_source": None if tie or not leaders else sources[leaders[0]],
        "tie": tie,
        "tied_pools": leaders if tie else [],
    }


def top_finalist(finalists: Sequence[str], stage1: Borda | None) -> tuple[str | None, str]:
    """The finalist with the most points in the cohort's stage-1 Borda: (id, ``ok``), (None,
    ``tie``) on a tie for the most points, (None, ``no stage-1 ballots``) without them."""
    if stage1 is None or stage1.n_ballots == 0:
        return None, "no stage-1 ballots"
    if not finalists:
        return None, "no finalists"
    pts = sorted(((stage1.candidate_points.get(c, 0), c) for c in finalists), key=lambda x: (-x[0], x[1]))
    if len(pts) > 1 and pts[0][0] == pts[1][0]:
        return None, "tie"
    return pts[0][1], "ok"
