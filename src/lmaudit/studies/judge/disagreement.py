"""The judge study's analysis: pure functions, judgments in, typed result sections out (no
model, no I/O).

Winner labels are compared in the candidates' original A/B orientation (a swapped condition's
displayed label is mapped back), within replicate: judgment ``r`` of a condition is paired
with judgment ``r`` of the reference. Invalid judgments are never given a label; a pair with an
invalid side is left out and counted. TIE is a label: a change to or from TIE is a disagreement.

The per-prompt classification and the primary endpoints 4 and 5 (the wrapper attraction and
aversion patterns, counted on PA and PB alone) are in :mod:`lmaudit.studies.judge.classification`.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from lmaudit.stats.intervals import ProportionCI, proportion_ci
from lmaudit.studies.judge.classification import (
    CLASSES,
    NOT_CLASSIFIABLE,
    Labels,
    classify,
    roles,
    unilateral_patterns,
)
from lmaudit.studies.judge.readout import readout_section
from lmaudit.studies.judge.sections import (
    Classification,
    Comparison,
    ConditionSummary,
    Confidence,
    Disagreement,
    Endpoints,
    ExactInterval,
    ItemChange,
    ItemRow,
    LabelCounts,
    ModelWins,
    NotEvaluable,
    SignTest,
    Wins,
)

__all__ = [
    "CLASSES",
    "NOT_CLASSIFIABLE",
    "Endpoints",
    "Judgment",
    "analyze",
    "classify",
    "condition_summary",
    "disagreement",
    "model_wins",
    "roles",
    "sign_test",
    "unilateral_patterns",
]

_SCORE = {"A": 1, "TIE": 0, "B": -1}  # ordinal position of a verdict, for the paired sign test


@dataclass(frozen=True)
class Judgment:
    """A final judgment; ``winner`` in the original orientation, ``None`` when invalid."""

    condition: str
    item: str
    replicate: int
    valid: bool
    winner: str | None
    confidence: float | None
    reason: str | None = None
    attempts: int = 1
    error: str | None = None


def label_table(judgments: Sequence[Judgment]) -> Labels:
    out: Labels = {}
    for j in judgments:
        out.setdefault(j.condition, {}).setdefault(j.item, {})[j.replicate] = j.winner if j.valid else None
    return out


def exact_interval(ci: ProportionCI) -> ExactInterval:
    """A proportion's interval as the results record it."""
    return ExactInterval(low=ci.low, high=ci.high, alpha=ci.alpha, method=ci.method)


def sign_test(up: int, down: int) -> float:
    """Exact two-sided sign test (McNemar's exact test for two labels): ``up`` pairs moved one
    way, ``down`` the other; p = P(|X - n/2| >= |up - n/2|), X ~ Bin(up + down, 1/2)."""
    n = up + down
    if n == 0:
        return 1.0
    from scipy import stats

    return float(stats.binomtest(up, n, 0.5, alternative="two-sided").pvalue)


def disagreement(
    ref: Mapping[str, Mapping[int, str | None]],
    cond: Mapping[str, Mapping[int, str | None]],
    items: Sequence[str],
    alpha: float,
    pairs: Sequence[tuple[int, int]] | None = None,
) -> Disagreement:
    """Winner-label disagreement over replicate-paired judgments, with its exact interval and
    the exact sign test of the ordinal shift (A > TIE > B) against the reference."""
    changed = n = excluded = up = down = 0
    changed_items: list[str] = []
    per_item: dict[str, ItemChange] = {}
    for item in items:
        r_ref, r_cond = ref.get(item, {}), cond.get(item, {})
        use = pairs if pairs is not None else [(r, r) for r in sorted(set(r_ref) & set(r_cond))]
        c_item = n_item = 0
        for a, b in use:
            if a not in r_ref or b not in r_cond:
                continue
            x, y = r_ref[a], r_cond[b]
            if x is None or y is None:
                excluded += 1
                continue
            n_item += 1
            if x != y:
                c_item += 1
                up += _SCORE[y] > _SCORE[x]
                down += _SCORE[y] < _SCORE[x]
        if n_item or item in ref or item in cond:
            per_item[item] = ItemChange(changed=c_item, n=n_item)
        changed += c_item
        n += n_item
        if c_item:
            changed_items.append(item)
    ci = proportion_ci(changed, n, alpha)
    return Disagreement(
        changed=changed,
        n=n,
        rate=ci.estimate,
        ci=exact_interval(ci),
        excluded_invalid=excluded,
        changed_prompts=tuple(changed_items),
        per_item=per_item,
        sign_test=SignTest(toward_A=up, toward_B=down, p=sign_test(up, down), method="exact binomial"),
    )


def condition_summary(js: Sequence[Judgment]) -> ConditionSummary:
    """A/B/TIE counts (original orientation), invalid count, mean and median confidence."""
    counts = Counter(j.winner for j in js if j.valid)
    conf = [float(j.confidence) for j in js if j.valid and j.confidence is not None]
    return ConditionSummary(
        counts=LabelCounts(
            A=counts.get("A", 0),
            B=counts.get("B", 0),
            TIE=counts.get("TIE", 0),
            INVALID=sum(not j.valid for j in js),
        ),
        n_judgments=len(js),
        confidence=Confidence(
            n=len(conf),
            mean=math.fsum(conf) / len(conf) if conf else None,
            median=statistics.median(conf) if conf else None,
            values=tuple(sorted(conf)),
        ),
    )


def model_wins(
    by_cond: Mapping[str, Sequence[Judgment]],
    mapping: Mapping[str, Mapping[str, str]] | None,
    reference: str,
    compared: Sequence[str] | None = None,
) -> ModelWins | NotEvaluable:
    """Wins per model after unblinding, the ranking per condition, and whether it changes
    across the conditions ``compared`` (default: all of them; the analysis passes the seed's
    P0/PA/PB/PAB where those roles are present, so a further condition such as SWAP has its
    ranking reported but does not decide ``ranking_changes``)."""
    if mapping is None:
        return NotEvaluable(evaluable=False, reason="no model mapping was given")
    models = sorted({m for sides in mapping.values() for m in sides.values()})
    by_condition: dict[str, Wins] = {}
    ranking: dict[str, tuple[tuple[str, ...], ...]] = {}
    for cid, js in by_cond.items():
        wins = dict.fromkeys(models, 0)
        ties = 0
        for j in js:
            if not j.valid or j.winner is None:
                continue
            if j.winner == "TIE":
                ties += 1
            else:
                wins[mapping[j.item][j.winner]] += 1
        by_condition[cid] = Wins(wins=wins, TIE=ties)
        levels = sorted(set(wins.values()), reverse=True)
        ranking[cid] = tuple(tuple(sorted(m for m in models if wins[m] == v)) for v in levels)
    ref_rank = ranking.get(reference)
    over = tuple(c for c in (compared if compared is not None else ranking) if c in ranking)
    return ModelWins(
        evaluable=True,
        models=tuple(models),
        by_condition=by_condition,
        ranking=ranking,
        ranking_compared=over,
        ranking_changes=None if ref_rank is None else any(ranking[c] != ref_rank for c in over),
    )


def _seed_roles(role: Mapping[str, str], reference: str) -> list[str] | None:
    """The seed's ranking comparison, P0/PA/PB/PAB, when all four roles are played (with the
    reference as P0); ``None`` (every condition) otherwise."""
    if all(r in role for r in ("P0", "PA", "PB", "PAB")) and role["P0"] == reference:
        return [role[r] for r in ("P0", "PA", "PB", "PAB")]
    return None


def _fields(d: Disagreement) -> dict[str, Any]:
    """A disagreement's fields, one level deep (its sections stay records)."""
    return {f.name: getattr(d, f.name) for f in fields(Disagreement)}


def analyze(
    judgments: Sequence[Judgment],
    *,
    conditions: Sequence[Mapping[str, Any]],
    reference: str,
    items: Sequence[str],
    alpha: float,
    mapping: Mapping[str, Mapping[str, str]] | None = None,
    readouts: Sequence[Mapping[str, Any]] = (),
) -> Endpoints:
    """Every endpoint of the judge study from final judgments (see the module docstring)."""
    present = {j.condition for j in judgments}
    conds = [c for c in conditions if c["id"] in present]
    cids = [c["id"] for c in conds]
    labels = label_table(judgments)
    by_cond = {cid: [j for j in judgments if j.condition == cid] for cid in cids}
    k = max((j.replicate for j in judgments), default=-1) + 1
    summary = {cid: condition_summary(js) for cid, js in by_cond.items()}

    comparisons = []
    if reference in labels:
        for cid in cids:
            if cid == reference:
                continue
            d = disagreement(labels[reference], labels[cid], items, alpha)
            comparisons.append(
                Comparison(
                    id=cid,
                    comparison=f"{cid} vs {reference}",
                    condition=cid,
                    reference=reference,
                    **_fields(d),
                )
            )
        if k >= 2:
            pairs = [(r, r + 1) for r in range(0, k - 1, 2)]
            d = disagreement(labels[reference], labels[reference], items, alpha, pairs=pairs)
            comparisons.append(
                Comparison(
                    id=f"{reference}-repeat",
                    comparison=f"{reference} vs {reference} (repeat)",
                    condition=reference,
                    reference=reference,
                    repeat_pairs=tuple(pairs),
                    **_fields(d),
                )
            )

    role = roles(conds)
    evaluable = all(r in role for r in ("P0", "PA", "PB", "PAB"))
    per_item_class: dict[str, list[str]] = {}
    pooled: Counter[str] = Counter()
    by_rep = []
    if evaluable:
        for r in range(k):
            rep: Counter[str] = Counter()
            for item in items:
                got = [labels.get(role[x], {}).get(item, {}).get(r) for x in ("P0", "PA", "PB", "PAB")]
                cls = classify(*got)
                per_item_class.setdefault(item, []).append(cls)
                rep[cls] += 1
            pooled += rep
            by_rep.append({c: rep.get(c, 0) for c in (*CLASSES, NOT_CLASSIFIABLE)})
    classification = Classification(
        evaluable=evaluable,
        roles=role,
        order=CLASSES,
        counts={c: pooled.get(c, 0) for c in (*CLASSES, NOT_CLASSIFIABLE)} if evaluable else None,
        by_replicate=tuple(by_rep) if evaluable else None,
    )

    # each condition's confidences by item, in replicate order: one pass over the judgments
    # (a scan of every judgment per item made the analysis quadratic in the prompts)
    confidence: dict[str, dict[str, list[float | None]]] = {cid: {} for cid in cids}
    for cid in cids:
        for j in sorted(by_cond[cid], key=lambda j: j.replicate):
            confidence[cid].setdefault(j.item, []).append(j.confidence)
    grid = tuple(
        ItemRow(
            item=item,
            labels={cid: tuple(labels[cid].get(item, {}).get(r) for r in range(k)) for cid in cids},
            confidence={cid: tuple(confidence[cid].get(item, [])) for cid in cids},
            classification=tuple(per_item_class[item]) if item in per_item_class else None,
        )
        for item in items
    )

    return Endpoints(
        n_prompts=len(items),
        k=k,
        conditions_analysed=tuple(cids),
        reference=reference,
        conditions=summary,
        disagreement=tuple(comparisons),
        classification=classification,
        patterns=unilateral_patterns(labels, role, items),
        items=grid,
        model_wins=model_wins(by_cond, mapping, reference, _seed_roles(role, reference)),
        readout=readout_section(readouts, cids, reference, alpha),
    )
