"""The source-blind ranking's candidate pools (appendix D): four pools per question, drawn from
the question's codebook and the salience of its concepts.

A *side* is the unconditioned lists (persona ``none``) or the conditioned lists (every persona).
On each side a concept has a member count (how many ensemble members surfaced it there), a
recurrence (the largest number of one member's lists on that side that contain it) and a
salience (Smith's S over all the side's lists, each list's concepts taken once, in order of
first mention). With ``n`` members on the side:

- **consensus**: surfaced by at least ``ceil(consensus_share * n)`` members (and by 2 when
  ``n >= 2``);
- **rare**: not consensus, surfaced by at most ``max(1, floor(rare_max_share * n))`` members,
  and stable: in at least ``rare_min_recurrence`` lists of one member.

So the four pools are unconditioned consensus, unconditioned rare, conditioned consensus and
conditioned rare. Each pool's ``k`` candidates are drawn uniformly from its concepts (listed by
salience, summed exactly, ties by concept id, i.e. by first appearance; then permuted by a
generator seeded by ``ranking.seed`` and the question); a candidate is shown as the concept's
most frequent item text on its side (ties: the alphabetically first), so the same concept may
appear once per side under different wording: the ranking's family collapse counts it once. Pools are drawn in the order above; a concept whose text an earlier pool has
already drawn is passed over (no text is shown twice).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.stats.salience import smiths_s
from lmaudit.studies.choir.codebook import question_codebook
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord

__all__ = ["POOLS", "Candidate", "build_pools", "source_of"]

POOLS = ("unconditioned_consensus", "unconditioned_rare", "conditioned_consensus", "conditioned_rare")


def source_of(pool: str) -> str:
    return "conditioned" if pool.startswith("conditioned") else "unconditioned"


@dataclass(frozen=True)
class Candidate:
    id: str  # stable within the question (the same for every ballot)
    text: str  # what evaluators read
    pool: str  # one of POOLS (hidden from evaluators)
    source: str  # conditioned | unconditioned (hidden)
    family: str  # the codebook concept (family collapse)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _seed(seed: int, *parts: object) -> int:
    h = hashlib.sha256(":".join(str(p) for p in (seed, *parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


def _side_stats(
    recs: list[ListRecord], concept_of: Mapping[str, int]
) -> tuple[int, dict[int, dict[str, Any]]]:
    members: set[str] = set()
    stats: dict[int, dict[str, Any]] = {}
    orders = []
    for r in recs:
        members.add(r.model)
        order = list(dict.fromkeys(concept_of[t] for t in r.items if t in concept_of))
        orders.append(order)
        for c in order:
            st = stats.setdefault(c, {"members": Counter(), "texts": Counter()})
            st["members"][r.model] += 1
        for t in r.items:
            if t in concept_of:
                stats[concept_of[t]]["texts"][t] += 1
    for concept, s in smiths_s(orders).as_dict().items():  # exact sums: salience ties are exact
        stats[int(str(concept))]["s"] = s
    return len(members), stats


def _eligible(n: int, stats: dict[int, dict[str, Any]], s: ChoirStudyConfig) -> dict[str, list[int]]:
    r = s.ranking
    need = max(math.ceil(r.consensus_share * n), 2 if n >= 2 else 1)
    rare_max = max(1, math.floor(r.rare_max_share * n))
    cons, rare = [], []
    for c, st in stats.items():
        k = len(st["members"])
        if k >= need:
            cons.append(c)
        elif k <= rare_max and max(st["members"].values()) >= r.rare_min_recurrence:
            rare.append(c)

    def by_salience(cs: list[int]) -> list[int]:
        return sorted(cs, key=lambda c: (-stats[c]["s"], c))

    return {"consensus": by_salience(cons), "rare": by_salience(rare)}


def build_pools(
    question: str, recs: list[ListRecord], vec: Mapping[str, NDArray[np.float32]], s: ChoirStudyConfig
) -> dict[str, Any]:
    """The question's pools and drawn candidates (a ``ranking_pool`` measurement record)."""
    cb = question_codebook(recs, vec, s)
    sides = {
        "unconditioned": [r for r in recs if r.persona == UNCONDITIONED],
        "conditioned": [r for r in recs if r.persona != UNCONDITIONED],
    }
    rng = np.random.default_rng(_seed(s.ranking.seed, "pools", question))
    shown: set[str] = set()
    candidates: list[Candidate] = []
    pools: dict[str, Any] = {}
    for side, side_recs in sides.items():
        n, stats = _side_stats(side_recs, cb.concept_of)
        for kind, concepts in _eligible(n, stats, s).items():
            pool = f"{side}_{kind}"
            drawn: list[str] = []
            for i in rng.permutation(len(concepts)).tolist():
                if len(drawn) == s.ranking.k:
                    break
                c = concepts[i]
                text = min(stats[c]["texts"].items(), key=lambda kv: (-kv[1], kv[0]))[0]
                if text in shown:
                    continue
                shown.add(text)
                cid = f"{pool}-{len(drawn) + 1}"
                drawn.append(cid)
                candidates.append(Candidate(cid, text, pool, side, str(c)))
            pools[pool] = {"members": n, "eligible": len(concepts), "drawn": drawn}
    order = {p: i for i, p in enumerate(POOLS)}
    candidates.sort(key=lambda c: (order[c.pool], c.id))
    return {
        "kind": "ranking_pool",
        "question": question,
        "pools": {p: pools[p] for p in POOLS},
        "candidates": [c.to_json() for c in candidates],
    }
