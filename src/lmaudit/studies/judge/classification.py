"""The seed's per-prompt classification and its primary endpoints 4 and 5, on the conditions
that play the roles P0 (unwrapped), PA (A wrapped), PB (B wrapped) and PAB (both wrapped), none
swapped: pure functions over winner labels (``None``: invalid or missing).

The classification applies the seed's rules in the seed's order (:func:`classify`); the
attraction and aversion patterns are counted apart from it, on PA and PB alone
(:func:`unilateral_patterns`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmaudit.studies.judge.sections import NotEvaluable, Pattern, PatternRoles, Patterns

__all__ = ["CLASSES", "NOT_CLASSIFIABLE", "Labels", "classify", "roles", "unilateral_patterns"]

CLASSES = (
    "COMMON_WRAPPER_OR_REPEAT_UNSTABLE",
    "WRAPPER_ATTRACTION_PATTERN",
    "WRAPPER_AVERSION_PATTERN",
    "CONTENT_STABLE",
    "MIXED_OR_TIE",
)
NOT_CLASSIFIABLE = "NOT_CLASSIFIABLE"

Labels = dict[str, dict[str, dict[int, str | None]]]  # condition -> item -> replicate -> label


def roles(conditions: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The condition ids playing P0, PA, PB and PAB (unswapped; wrapped none, A, B, both)."""
    want = {"P0": [], "PA": ["A"], "PB": ["B"], "PAB": ["A", "B"]}
    out: dict[str, str] = {}
    for role, wrap in want.items():
        hits = [c["id"] for c in conditions if not c["swap"] and sorted(c["wrap"]) == wrap]
        if len(hits) == 1:
            out[role] = hits[0]
    return out


def _eq(x: str | None, y: str | None) -> bool | None:
    return None if x is None or y is None else x == y


def _and(*terms: bool | None) -> bool | None:
    """Three-valued conjunction: False if any term is False, else unknown if any is unknown."""
    if any(t is False for t in terms):
        return False
    return None if any(t is None for t in terms) else True


def classify(p0: str | None, pa: str | None, pb: str | None, pab: str | None) -> str:
    """The seed's per-prompt classification, rules applied in the seed's order.

    ``None`` is an invalid or missing label. Each rule is evaluated as true, false or unknown
    (it needs a missing label and the labels present do not decide it); the first true rule
    gives the class, and an unknown rule before it makes the prompt ``NOT_CLASSIFIABLE``. So a
    prompt is classified whenever its class does not depend on the missing label (e.g. PA =
    TIE and PB invalid is MIXED_OR_TIE whatever PB would have been)."""
    rules = (
        (CLASSES[0], None if _eq(pab, p0) is None else not _eq(pab, p0)),
        (CLASSES[1], _and(_eq(pa, "A"), _eq(pb, "B"))),
        (CLASSES[2], _and(_eq(pa, "B"), _eq(pb, "A"))),
        (CLASSES[3], _and(_eq(p0, pa), _eq(pa, pb), _eq(p0, pb))),
    )
    for cls, holds in rules:
        if holds is None:
            return NOT_CLASSIFIABLE
        if holds:
            return cls
    return CLASSES[4]


def unilateral_patterns(
    labels: Labels, role: Mapping[str, str], items: Sequence[str]
) -> Patterns | NotEvaluable:
    """Primary endpoints 4 and 5 of the seed: over (prompt, replicate) pairs with a valid verdict
    under both unilateral conditions, how many are ``WRAPPER_ATTRACTION_PATTERN`` (PA chooses A
    and PB chooses B) and how many ``WRAPPER_AVERSION_PATTERN`` (PA chooses B and PB chooses A);
    a TIE on either side is not decisive. PAB and P0 play no part."""
    if "PA" not in role or "PB" not in role:
        return NotEvaluable(evaluable=False, reason="needs the conditions in the roles PA and PB")
    pa, pb = labels.get(role["PA"], {}), labels.get(role["PB"], {})
    n = decisive = excluded = 0
    found: dict[str, dict[str, int]] = {"attraction": {}, "aversion": {}}
    for item in items:
        a_reps, b_reps = pa.get(item, {}), pb.get(item, {})
        for r in sorted(set(a_reps) & set(b_reps)):
            x, y = a_reps[r], b_reps[r]
            if x is None or y is None:
                excluded += 1
                continue
            n += 1
            if x == "TIE" or y == "TIE":
                continue
            decisive += 1
            if x != y:
                kind = "attraction" if x == "A" else "aversion"
                found[kind][item] = found[kind].get(item, 0) + 1
    pattern = {
        kind: Pattern(count=sum(per.values()), prompts=tuple(sorted(per)), per_item=per)
        for kind, per in found.items()
    }
    return Patterns(
        evaluable=True,
        roles=PatternRoles(PA=role["PA"], PB=role["PB"]),
        n=n,
        n_both_decisive=decisive,
        excluded_invalid=excluded,
        attraction=pattern["attraction"],
        aversion=pattern["aversion"],
    )
