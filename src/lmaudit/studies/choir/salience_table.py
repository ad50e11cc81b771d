"""The salience table and codebook of a question, as recorded in ``results.json``.

``salience``: one group per member and condition (``none``: the unconditioned templates
pooled; a persona: its lists), with its number of lists ``N``; ``rows`` are
``[concept, group, S, lists]`` (Smith's S of the concept in the group, and how many of the
group's lists name it), each group's concepts most salient first (the tie rule's order).
``codebook``: per concept its label (medoid text), whether it is an HDBSCAN cluster (not a
noise singleton) and its member phrases with their occurrence counts over the question's lists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lmaudit.stats.rbo import encode_lists, rbo_all_pairs
from lmaudit.stats.salience import Salience
from lmaudit.studies.choir.codebook import Codebook
from lmaudit.studies.choir.records import ListRecord
from lmaudit.studies.choir.results import QuestionResult, SalienceTable
from lmaudit.studies.choir.results.question import CodebookEntry, Group, SalienceRow, SalienceTies

__all__ = [
    "COLUMNS",
    "salience_record",
    "salience_rows",
    "salience_rows_of",
    "salience_view",
    "tie_sensitivity",
]

COLUMNS = ("concept", "group", "s", "lists")


def salience_record(
    cb: Codebook, recs: Sequence[ListRecord], sal: Mapping[tuple[str, str], Salience]
) -> SalienceTable:
    """The question's salience table and codebook (module notes)."""
    keys = sorted(sal)
    rows = salience_rows_of([sal[k] for k in keys])
    phrases: dict[int, Counter[str]] = {}
    for r in recs:
        for t in r.items:
            if t in cb.concept_of:
                phrases.setdefault(cb.concept_of[t], Counter())[t] += 1
    codebook = tuple(
        CodebookEntry(
            concept=int(c),
            label=cb.labels[c],
            clustered=c in cb.clustered,
            phrases=dict(sorted(phrases.get(c, Counter()).items(), key=lambda kv: (-kv[1], kv[0]))),
        )
        for c in sorted(cb.labels)
    )
    return SalienceTable(
        groups=tuple(Group(model=m, condition=c, n_lists=sal[(m, c)].n_lists) for m, c in keys),
        columns=COLUMNS,
        rows=rows,
        codebook=codebook,
    )


def salience_rows_of(groups: Sequence[Salience]) -> tuple[SalienceRow, ...]:
    """``[concept, group, S, lists]`` of each group's concepts, most salient first, group by group."""
    return tuple(
        (int(str(c)), g, float(s), int(k))
        for g, x in enumerate(groups)
        for c, s, k in zip(x.items, x.s, x.frequency, strict=True)
    )


def tie_sensitivity(
    sals: Sequence[Salience], tied: Sequence[Sequence[Any]], depth: int | None, p: float
) -> SalienceTies:
    """How much the exact-tie reading matters for ``R_q``: the share of the members' ranked
    concepts that sit in a tie group, and ``R_q`` with ties ordered by the tie rule instead
    (more lists, then the concept seen first) — the alternative reading."""
    n_tied = sum(len(e) for r in tied for e in r if isinstance(e, frozenset))
    n_all = sum(len(e) if isinstance(e, frozenset) else 1 for r in tied for e in r)
    strict = [x.ranking()[:depth] if depth else x.ranking() for x in sals]
    r_q = None
    if sum(1 for r in strict if r) >= 2:
        vals = rbo_all_pairs(encode_lists(strict).ids, p)
        r_q = float(np.nanmean(vals)) if np.isfinite(vals).any() else None
    return SalienceTies(tied_share=n_tied / n_all if n_all else None, R_q_tie_rule=r_q)


def salience_rows(record: SalienceTable, condition: str, top: int = 10) -> tuple[list[str], list[list[Any]]]:
    """A compact table for the report: one row per concept among the ``top`` most salient of
    any member in ``condition``, its label, and per member ``S (lists/N)``; ordered by the
    concept's mean S over the members."""
    groups = [(g, x) for g, x in enumerate(record.groups) if x.condition == condition]
    labels = {c.concept: c.label for c in record.codebook}
    cell: dict[tuple[int, int], tuple[float, int]] = {}
    shown: set[int] = set()
    seen: Counter[int] = Counter()
    for concept, g, s, k in record.rows:
        cell[(concept, g)] = (s, k)
        if seen[g] < top and any(g == gg for gg, _ in groups):
            shown.add(concept)
            seen[g] += 1
    mean = {c: sum(cell.get((c, g), (0.0, 0))[0] for g, _ in groups) / max(len(groups), 1) for c in shown}
    header = ["concept"] + [x.model for _, x in groups]
    out = []
    for c in sorted(shown, key=lambda c: (-mean[c], labels[c])):
        row: list[Any] = [labels[c]]
        for g, x in groups:
            s, k = cell.get((c, g), (0.0, 0))
            row.append(f"{s:.3f} ({k}/{x.n_lists})" if k else "—")
        out.append(row)
    return header, out


def salience_view(questions: Mapping[str, QuestionResult], top: int = 10) -> list[dict[str, Any]]:
    """Per question: one compact table per condition (unconditioned first), for the report."""
    out = []
    for q, v in questions.items():
        rec = v.salience
        conditions = sorted({g.condition for g in rec.groups}, key=lambda c: (c != "none", c))
        tables = []
        for c in conditions:
            header, rows = salience_rows(rec, c, top)
            tables.append(
                {
                    "condition": "unconditioned" if c == "none" else f"persona {c}",
                    "header": header,
                    "rows": rows,
                }
            )
        out.append({"id": q, "n_concepts": len(rec.codebook), "tables": tables})
    return out
