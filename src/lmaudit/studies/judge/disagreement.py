"""The judge study's analysis: pure functions, judgments in, result dicts out (no model, no I/O).

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
from dataclasses import dataclass
from typing import Any

from lmaudit.stats.intervals import proportion_ci
from lmaudit.studies.judge.classification import (
    CLASSES,
    NOT_CLASSIFIABLE,
    Labels,
    classify,
    roles,
    unilateral_patterns,
)

__all__ = [
    "CLASSES",
    "NOT_CLASSIFIABLE",
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

LABELS = ("A", "B", "TIE")
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
) -> dict[str, Any]:
    """Winner-label disagreement over replicate-paired judgments, with its exact interval and
    the exact sign test of the ordinal shift (A > TIE > B) against the reference."""
    changed = n = excluded = up = down = 0
    changed_items: list[str] = []
    per_item: dict[str, dict[str, int]] = {}
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
            per_item[item] = {"changed": c_item, "n": n_item}
        changed += c_item
        n += n_item
        if c_item:
            changed_items.append(item)
    ci = proportion_ci(changed, n, alpha)
    return {
        "changed": changed,
        "n": n,
        "rate": ci.estimate,
        "ci": {"low": ci.low, "high": ci.high, "alpha": alpha, "method": ci.method},
        "excluded_invalid": excluded,
        "changed_prompts": changed_items,
        "per_item": per_item,
        "sign_test": {"toward_A": up, "toward_B": down, "p": sign_test(up, down), "method": "exact binomial"},
    }


def condition_summary(js: Sequence[Judgment]) -> dict[str, Any]:
    """A/B/TIE counts (original orientation), invalid count, mean and median confidence."""
    counts = Counter(j.winner for j in js if j.valid)
    conf = [float(j.confidence) for j in js if j.valid and j.confidence is not None]
    return {
        "counts": {**{lab: counts.get(lab, 0) for lab in LABELS}, "INVALID": sum(not j.valid for j in js)},
        "n_judgments": len(js),
        "confidence": {
            "n": len(conf),
            "mean": math.fsum(conf) / len(conf) if conf else None,
            "median": statistics.median(conf) if conf else None,
            "values": sorted(conf),
        },
    }


def model_wins(
    by_cond: Mapping[str, Sequence[Judgment]],
    mapping: Mapping[str, Mapping[str, str]] | None,
    reference: str,
    compared: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Wins per model after unblinding, the ranking per condition, and whether it changes
    across the conditions ``compared`` (default: all of them; the analysis passes the seed's
    P0/PA/PB/PAB where those roles are present, so a further condition such as SWAP has its
    ranking reported but does not decide ``ranking_changes``)."""
    if mapping is None:
        return {"evaluable": False, "reason": "no model mapping was given"}
    models = sorted({m for sides in mapping.values() for m in sides.values()})
    out: dict[str, Any] = {"evaluable": True, "models": models, "by_condition": {}, "ranking": {}}
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
        out["by_condition"][cid] = {"wins": wins, "TIE": ties}
        levels = sorted(set(wins.values()), reverse=True)
        out["ranking"][cid] = [sorted(m for m in models if wins[m] == v) for v in levels]
    ref_rank = out["ranking"].get(reference)
    over = [c for c in (compared if compared is not None else out["ranking"]) if c in out["ranking"]]
    out["ranking_compared"] = over
    out["ranking_changes"] = None if ref_rank is None else any(out["ranking"][c] != ref_rank for c in over)
    return out


def _mean_interval(xs: Sequence[float], alpha: float) -> dict[str, Any]:
    """The mean of per-prompt values with its Student-t interval and two-sided p against zero
    over prompts (None where fewer than two prompts or no spread leave them undefined)."""
    from scipy import stats  # imported where used: registering the study stays light

    mean = math.fsum(xs) / len(xs)
    if len(xs) < 2 or min(xs) == max(xs):
        return {"mean": mean, "ci": None, "p": None}
    res = stats.ttest_1samp(list(xs), 0.0)
    ci = res.confidence_interval(1 - alpha)
    return {"mean": mean, "ci": [float(ci.low), float(ci.high)], "p": float(res.pvalue)}


def _readouts(
    readouts: Sequence[Mapping[str, Any]], conds: Sequence[str], reference: str, alpha: float
) -> dict[str, Any]:
    """Per condition the mean P(A), P(B), P(TIE) and the mass off the three labels over prompts
    (each prompt's replicates averaged first) and, against the reference on the same prompts, the
    mean shift of each label's probability with its interval over prompts."""
    by: dict[str, dict[str, list[dict[str, float]]]] = {}
    other: dict[str, dict[str, list[float]]] = {}
    for r in readouts:
        by.setdefault(r["condition"], {}).setdefault(r["item"], []).append(r["probs_original"])
        other.setdefault(r["condition"], {}).setdefault(r["item"], []).append(float(r.get("other") or 0.0))
    out: dict[str, Any] = {}
    ref = by.get(reference, {})
    for cid in conds:
        items = by.get(cid)
        if not items:
            continue
        mean_item = {i: {v: math.fsum(p[v] for p in ps) / len(ps) for v in LABELS} for i, ps in items.items()}
        off = [math.fsum(xs) / len(xs) for xs in other[cid].values()]
        entry: dict[str, Any] = {
            "n_items": len(mean_item),
            "mean": {v: math.fsum(m[v] for m in mean_item.values()) / len(mean_item) for v in LABELS},
            "other": {"mean": math.fsum(off) / len(off), "max": max(off)},
            "items": mean_item,
        }
        common = [i for i in mean_item if i in ref]
        if cid != reference and common:
            ref_mean = {i: {v: math.fsum(p[v] for p in ref[i]) / len(ref[i]) for v in LABELS} for i in common}
            shift = {i: {v: mean_item[i][v] - ref_mean[i][v] for v in LABELS} for i in common}
            per_label = {v: _mean_interval([shift[i][v] for i in common], alpha) for v in LABELS}
            entry["shift_vs_reference"] = {
                "mean": {v: per_label[v]["mean"] for v in LABELS},
                "ci": {v: per_label[v]["ci"] for v in LABELS},
                "p": {v: per_label[v]["p"] for v in LABELS},
                "n": len(common),
                "interval": f"Student t over prompts, {100 * (1 - alpha):g}%",
                "items": shift,
            }
        out[cid] = entry
    return out


def _seed_roles(role: Mapping[str, str], reference: str) -> list[str] | None:
    """The seed's ranking comparison, P0/PA/PB/PAB, when all four roles are played (with the
    reference as P0); ``None`` (every condition) otherwise."""
    if all(r in role for r in ("P0", "PA", "PB", "PAB")) and role["P0"] == reference:
        return [role[r] for r in ("P0", "PA", "PB", "PAB")]
    return None


def analyze(
    judgments: Sequence[Judgment],
    *,
    conditions: Sequence[Mapping[str, Any]],
    reference: str,
    items: Sequence[str],
    alpha: float,
    mapping: Mapping[str, Mapping[str, str]] | None = None,
    readouts: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
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
                {
                    "id": cid,
                    "comparison": f"{cid} vs {reference}",
                    "condition": cid,
                    "reference": reference,
                    **d,
                }
            )
        if k >= 2:
            pairs = [(r, r + 1) for r in range(0, k - 1, 2)]
            d = disagreement(labels[reference], labels[reference], items, alpha, pairs=pairs)
            comparisons.append(
                {
                    "id": f"{reference}-repeat",
                    "comparison": f"{reference} vs {reference} (repeat)",
                    "condition": reference,
                    "reference": reference,
                    "repeat_pairs": [list(p) for p in pairs],
                    **d,
                }
            )

    role = roles(conds)
    classification: dict[str, Any] = {
        "evaluable": all(r in role for r in ("P0", "PA", "PB", "PAB")),
        "roles": role,
        "order": list(CLASSES),
    }
    per_item_class: dict[str, list[str]] = {}
    if classification["evaluable"]:
        pooled: Counter[str] = Counter()
        by_rep = []
        for r in range(k):
            rep: Counter[str] = Counter()
            for item in items:
                got = [labels.get(role[x], {}).get(item, {}).get(r) for x in ("P0", "PA", "PB", "PAB")]
                cls = classify(*got)
                per_item_class.setdefault(item, []).append(cls)
                rep[cls] += 1
            pooled += rep
            by_rep.append({c: rep.get(c, 0) for c in (*CLASSES, NOT_CLASSIFIABLE)})
        classification["counts"] = {c: pooled.get(c, 0) for c in (*CLASSES, NOT_CLASSIFIABLE)}
        classification["by_replicate"] = by_rep

    # each condition's confidences by item, in replicate order: one pass over the judgments
    # (a scan of every judgment per item made the analysis quadratic in the prompts)
    confidence: dict[str, dict[str, list[float | None]]] = {cid: {} for cid in cids}
    for cid in cids:
        for j in sorted(by_cond[cid], key=lambda j: j.replicate):
            confidence[cid].setdefault(j.item, []).append(j.confidence)
    grid = []
    for item in items:
        row: dict[str, Any] = {
            "item": item,
            "labels": {cid: [labels[cid].get(item, {}).get(r) for r in range(k)] for cid in cids},
            "confidence": {cid: confidence[cid].get(item, []) for cid in cids},
        }
        if item in per_item_class:
            row["classification"] = per_item_class[item]
        grid.append(row)

    return {
        "n_prompts": len(items),
        "k": k,
        "conditions_analysed": cids,
        "reference": reference,
        "conditions": summary,
        "disagreement": comparisons,
        "classification": classification,
        "patterns": unilateral_patterns(labels, role, items),
        "items": grid,
        "model_wins": model_wins(by_cond, mapping, reference, _seed_roles(role, reference)),
        "readout": _readouts(readouts, cids, reference, alpha),
    }
