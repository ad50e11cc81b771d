"""Human calibration of the source-blind ranking (appendix D.1): participants' choices against
the AI evaluator cohorts' top-ranked candidates.

Input (``study.calibration_path``, JSONL; copied into the measurement file): ``{"kind":
"cohort_top", "cohort": "conditioned"|"unconditioned", "question", "item"}`` per cohort and
question; ``{"kind": "choice", "participant", "question", "item", "source":
"conditioned"|"unconditioned"}`` per participant and question; optionally ``{"kind": "pool",
"question", "n_items", "n_conditioned"}`` for the within-question random expectation of
conditioned-source choices. Reported: conditioned-source choices (observed and expected),
choices matching each cohort's top item, and the paired participant-level exact sign-flip test
of (matches of the conditioned cohort's top - matches of the unconditioned cohort's top); the
same on the questions where the cohorts' tops differ; and the participants' agreement with one
another (:func:`agreement`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.provenance.io import iter_jsonl
from lmaudit.stats.permutation import sign_flip_test
from lmaudit.studies.choir.results.ranking import Agreement, Calibration, DisagreeBlock, SignFlip

__all__ = ["agreement", "analyze_calibration", "read_calibration"]

COHORTS = ("conditioned", "unconditioned")
_FIELDS = {
    "cohort_top": ("cohort", "question", "item"),
    "choice": ("participant", "question", "item", "source"),
    "pool": ("question", "n_items", "n_conditioned"),
}


def read_calibration(path: str | Path) -> list[dict[str, Any]]:
    rows = []
    for line, obj in iter_jsonl(path):
        where = f"{path}: line {line}"
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if kind not in _FIELDS:
            raise InputError(f"{where}: field 'kind' = {kind!r} is not cohort_top, choice or pool")
        missing = [k for k in _FIELDS[kind] if k not in obj]
        if missing:
            raise InputError(f"{where}: missing field(s) {missing}")
        for k in ("cohort", "source"):
            if k in _FIELDS[kind] and obj[k] not in COHORTS:
                raise InputError(f"{where}: field {k!r} = {obj[k]!r} is not conditioned or unconditioned")
        if kind == "pool" and not (
            isinstance(obj["n_items"], int)
            and isinstance(obj["n_conditioned"], int)
            and 0 <= obj["n_conditioned"] <= obj["n_items"] > 0
        ):
            raise InputError(
                f"{where}: fields 'n_items' > 0 and 0 <= 'n_conditioned' <= 'n_items' must be integers"
            )
        rows.append({"kind": f"calibration_{kind}", **{k: obj[k] for k in _FIELDS[kind]}})
    return rows


def _counts(choices: list[Mapping[str, Any]], top: Mapping[tuple[str, str], Any]) -> dict[str, Any]:
    """Choices matching each cohort's top and the participants' paired sign-flip test."""
    per: dict[str, int] = {}
    m = {c: 0 for c in COHORTS}
    for ch in choices:
        hit = {c: int(top.get((c, ch["question"])) == ch["item"]) for c in COHORTS}
        for c in COHORTS:
            m[c] += hit[c]
        per[str(ch["participant"])] = (
            per.get(str(ch["participant"]), 0) + hit["conditioned"] - hit["unconditioned"]
        )
    stat, p = sign_flip_test(list(per.values()))
    return {
        "n_choices": len(choices),
        "n_participants": len(per),
        "match_conditioned_top": m["conditioned"],
        "match_unconditioned_top": m["unconditioned"],
        "sign_flip": SignFlip(sum=stat, p=p),
    }


def agreement(
    choices: Iterable[Mapping[str, Any]], pools: Mapping[str, Mapping[str, Any]]
) -> Agreement | None:
    """Inter-participant agreement (the seed: "mean modal share 51%; pairwise agreement 38%
    versus a 29% uniform baseline"). Per question, the modal share is the share of its
    participants who chose its most chosen item, and pairwise agreement the share of pairs of
    its participants who chose the same item; both are averaged over questions with equal
    weight. The uniform baseline is the pairwise agreement of participants choosing uniformly at
    random: 1 / the question's number of items (from its ``pool`` record), averaged the same way;
    ``None`` unless every question has a pool record."""
    by_q: dict[str, Counter[str]] = {}
    for c in choices:
        by_q.setdefault(str(c["question"]), Counter())[str(c["item"])] += 1
    modal, pairwise, uniform = [], [], []
    for q, counts in sorted(by_q.items()):
        n = sum(counts.values())
        if n < 2:
            continue
        modal.append(max(counts.values()) / n)
        pairwise.append(sum(k * (k - 1) for k in counts.values()) / (n * (n - 1)))
        if q in pools:
            uniform.append(1 / pools[q]["n_items"])
    if not modal:
        return None
    return Agreement(
        n_questions=len(modal),
        mean_modal_share=sum(modal) / len(modal),
        pairwise_agreement=sum(pairwise) / len(pairwise),
        uniform_baseline=sum(uniform) / len(uniform) if len(uniform) == len(modal) else None,
    )


def analyze_calibration(
    rows: Iterable[Mapping[str, Any]], ranking_tops: Iterable[Mapping[str, Any]] = ()
) -> Calibration | None:
    """``ranking_tops``: the ranking module's cohort tops (``calibration_cohort_top`` records),
    used when the calibration file gives none."""
    rows = list(rows)
    choices = [r for r in rows if r["kind"] == "calibration_choice"]
    if not choices:
        return None
    given = [r for r in rows if r["kind"] == "calibration_cohort_top"]
    top = {(r["cohort"], r["question"]): r["item"] for r in (given or list(ranking_tops))}
    pools = {r["question"]: r for r in rows if r["kind"] == "calibration_pool"}
    disagree = {q for (c, q) in top if top.get(("conditioned", q)) != top.get(("unconditioned", q))}
    return Calibration(
        **_counts(choices, top),
        cohort_tops_from="records" if given else "ranking",
        conditioned_source=sum(1 for c in choices if c["source"] == "conditioned"),
        conditioned_expected=(
            sum(pools[c["question"]]["n_conditioned"] / pools[c["question"]]["n_items"] for c in choices)
            if all(c["question"] in pools for c in choices)
            else None
        ),
        cohorts_disagree=DisagreeBlock(
            **_counts([c for c in choices if c["question"] in disagree], top), questions=len(disagree)
        ),
        agreement=agreement(choices, pools),
    )
