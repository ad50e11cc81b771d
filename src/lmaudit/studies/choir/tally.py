"""The Borda count with family collapse (appendix D, stage 1): the tally the ranking analysis
(:mod:`.borda`) and the finalist stage (:mod:`.finalists`) both read.

Per ballot, walking the ranking best first, a candidate whose family (codebook concept) has
already appeared earns nothing; the ``F`` distinct families get ``F - 1, F - 2, ..., 0`` points
in the order they first appear, and each family's points are credited to the candidate that
carried its best rank.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Borda", "borda"]


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
