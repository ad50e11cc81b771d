"""What the QQ report says first: the verdict (plain sentence, key numbers, whether the run could
answer at all) and the alerts, built from the results and the gates as the report reads them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lmaudit.reporting import fmt, interval_text, num
from lmaudit.reporting.page import Verdict

if TYPE_CHECKING:
    from lmaudit.results import Interval
    from lmaudit.studies.qq.results import QQResults

__all__ = [
    "TERMS",
    "across_facts",
    "alerts",
    "failed_g3",
    "label_effect_line",
    "sampling_caveat",
    "terms",
    "verdict",
]

#: the glossary terms the QQ page uses, in the order a reader meets them
TERMS = (
    "QQ equality",
    "SATISFIED / VIOLATED / INDETERMINATE",
    "envelope",
    "other mass",
    "OSS",
    "Gamma",
    "saturated",
    "G1",
    "G2",
    "G3",
    "mapping",
)
VERDICTS = ("SATISFIED", "VIOLATED", "INDETERMINATE")
#: the terms that describe items: a run that decided none shows only the gates' terms
_ITEM_TERMS = frozenset(
    ("QQ equality", "SATISFIED / VIOLATED / INDETERMINATE", "envelope", "OSS", "Gamma", "saturated")
)


def terms(results: QQResults) -> list[str]:
    """The glossary terms of :data:`TERMS` that apply to this run: item terms only when an item
    was decided, "mapping" only when more than one label mapping was measured."""
    mappings = {m.mapping for it in results.items for m in it.mappings}
    out = []
    for t in TERMS:
        if (t in _ITEM_TERMS and not results.items) or (t == "mapping" and len(mappings) < 2):
            continue
        out.append(t)
    return out


def _g(x: Any) -> str:
    return fmt(x, ".3g")


def _status(gate: Mapping[str, Any]) -> str:
    return str(gate["status"])


def failed_g3(g3: Mapping[str, Any]) -> tuple[int, int]:
    """``(failed, spot-checked cells)`` of gate G3, each cell decided by its last attempt."""
    final: dict[tuple[Any, ...], bool] = {}
    for c in g3["checks"]:
        final[(c["item"], c["mapping"], c["order"])] = bool(c["passed"])
    return sum(not ok for ok in final.values()), len(final)


def _counts(results: QQResults) -> tuple[int, dict[str, int], dict[str, int], int]:
    c = results.counts
    return results.n_items, c.verdict, c.gamma_class, c.saturated


def _reasons(results: QQResults, gates: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Why the run could not answer (empty when it could)."""
    n, v, _, _ = _counts(results)
    out = []
    g1, g2, g3 = gates["G1"], gates["G2"], gates["G3"]
    if _status(g1) == "FAIL":
        out.append(
            f"gate G1 failed: {g1['failed']} of {g1['checked']} rendered contexts split an answer "
            "label into more than one token, so the label probabilities do not measure the answer"
        )
    median = num(g2["median_other"])
    mostly_other = median is not None and median > 0.5
    if _status(g2) == "FAIL":
        out.append(
            f"gate G2 failed: {_g(g2['max_other'])} of the mass is off the labels at the worst position "
            f"(G2 needs < {_g(g2['threshold'])})"
            + (
                f", and at most positions most of it is (median {_g(median)}: typical of a base model, or "
                "of a prompt that does not elicit a label), so the envelopes are too wide to decide anything"
                if mostly_other
                else f"; the widest q envelope is {_g(g2['max_envelope_width'])}"
            )
        )
    if _status(g3) == "FAIL":
        bad, total = failed_g3(g3)
        out.append(
            f"gate G3 failed: in {bad} of {total} spot checks the sampled answers disagree with the "
            "log-probabilities"
        )
    if mostly_other and _status(g2) != "FAIL":
        out.append(
            f"at most positions most of the mass is off the labels (median {_g(median)}), so the "
            "envelopes are too wide to decide anything"
        )
    if n == 0:
        out.append("no item was analysed")
    elif v["INDETERMINATE"] == n:
        why = (
            "its range over the sampling region straddles the margin; more draws narrow it"
            if results.sampling_error is not None
            else "its envelope straddles the margin"
        )
        out.append(f"every one of the {n} items is INDETERMINATE ({why})")
    return out


def sampling_caveat(results: QQResults) -> str | None:
    """What a sampled run's verdicts allow for (None when the probabilities were read, not sampled)."""
    region = results.sampling_error
    if region is None:
        return None
    level = f"{1 - region.alpha:.0%} "
    fewest = min((it.min_draws for it in region.items), default=None)
    return (
        "The answers were sampled"
        + ("" if fewest is None else f" (at least {fewest:.0f} draws per position)")
        + f", so every verdict allows for sampling error: q and Γ are bounded over a simultaneous {level}"
        "confidence region per item (exact Clopper-Pearson bounds on each position's label probabilities, "
        "Bonferroni-adjusted over the item's positions). VIOLATED and CONTEXTUAL hold for the whole region; "
        "an item whose range reaches the margin is INDETERMINATE."
    )


def _tally(n: int, v: Mapping[str, int]) -> str:
    return (
        f"{v['SATISFIED']} of {n} items satisfy the QQ equality, {v['VIOLATED']} violate it and "
        f"{v['INDETERMINATE']} are INDETERMINATE"
    )


def _ci(ci: Interval | None, spec: str) -> str:
    return interval_text(ci, spec, missing="no interval below two items")


def _pct_ci(ci: Interval | None) -> str:
    if ci is None or num(ci.lo) is None or num(ci.hi) is None:
        return "no interval"
    return f"[{100 * ci.lo:.1f}%, {100 * ci.hi:.1f}%]"


def across_facts(results: QQResults) -> list[str]:
    """The across-item summaries in a sentence each (``results.summary``)."""
    summ = results.across_items
    level = f"{100 * summ.confidence:g}%"
    aq, sv = summ.mean_abs_q, summ.share_violated
    if not sv.n:
        return ["Across items: no item was analysed, so there is nothing to summarise."]
    out = [
        f"Across the {sv.n} items analysed: {sv.k} VIOLATED ({100 * float(sv.share or 0):.1f}%, "
        f"{level} Clopper-Pearson interval {_pct_ci(sv.ci)}); mean |q| {fmt(aq.mean)} "
        f"({level} t interval over items {_ci(aq.ci, '.3f')})."
    ]
    line = label_effect_line(results, large_only=False)
    if line:
        out.append(line)
    return out


def label_effect_line(results: QQResults, *, large_only: bool) -> str | None:
    """The label-mapping effect (mean |ΔOSS| between mappings) in a sentence; with
    ``large_only``, only when it is large (the lower end of its interval above the threshold)."""
    le = results.across_items.label_effect
    if le is None or (large_only and not le.large):
        return None
    level = f"{100 * results.across_items.confidence:g}%"
    where = (
        f"mean |ΔOSS| between label mappings {fmt(le.mean)} over {le.n} "
        f"item{'' if le.n == 1 else 's'} ({level} t interval {_ci(le.ci, '.3f')})"
    )
    if le.large:
        return (
            f"The label mapping changes the answers: {where}, above the threshold {_g(le.large_threshold)} "
            "at that level."
        )
    return (
        f"Label-mapping effect: {where}; not shown to exceed the threshold {_g(le.large_threshold)} "
        "(the interval's lower end must)."
    )


def verdict(results: QQResults, gates: Mapping[str, Mapping[str, Any]]) -> Verdict:
    """The answer: how many items satisfy, violate or are indeterminate, or why the run cannot say;
    ``gates`` as the page shows them (:func:`lmaudit.studies.qq.report.gates.gate_views`)."""
    n, v, g, n_sat = _counts(results)
    eps = _g(results.params.epsilon)
    threshold = _g(results.saturation.threshold)
    g1, g2, g3 = gates["G1"], gates["G2"], gates["G3"]
    bad3, n3 = failed_g3(g3)
    facts = [
        f"QQ verdicts: {v['SATISFIED']} SATISFIED, {v['VIOLATED']} VIOLATED, {v['INDETERMINATE']} INDETERMINATE "
        f"of {n} items (margin ε = {eps} on |q|, decided over each item's envelope).",
        *across_facts(results),
        f"Γ classes: {g['NONCONTEXTUAL']} NONCONTEXTUAL, {g['CONTEXTUAL']} CONTEXTUAL, "
        f"{g['INDETERMINATE']} INDETERMINATE (CONTEXTUAL certifies residual contextuality).",
        f"Saturated: {n_sat} of {n} items (threshold {threshold}).",
    ]
    # a failed gate is stated once, in the headline (_reasons): the facts list the others
    shown = {
        "G1": f"G1 {_status(g1)} ({g1['checked'] or 0} rendered contexts checked, {g1['failed'] or 0} failed)",
        "G2": f"G2 {_status(g2)} (max other mass {_g(g2['max_other'])}, must stay below {_g(g2['threshold'])})",
        "G3": f"G3 {_status(g3)} ({n3 - bad3} of {n3} spot checks agree)",
    }
    ok = [text for name, text in shown.items() if _status(gates[name]) != "FAIL"]
    if ok:
        facts.append(f"{'Gates' if len(ok) == len(shown) else 'Other gates'}: {'; '.join(ok)}.")
    median = num(g2["median_other"])
    if _status(g2) != "FAIL" and not (median is not None and median > 0.5):
        facts.append(
            f"Mass off the labels: at most {_g(g2['max_other'])} at any position, median "
            f"{_g(g2['median_other'])}; the widest q envelope is {_g(g2['max_envelope_width'])}."
        )
    excluded = results.excluded or ()
    if excluded:
        facts.append(
            f"Excluded: {len(excluded)} item{'' if len(excluded) == 1 else 's'} "
            f"({', '.join(x.item for x in excluded)}) with no probability on either label "
            "at some position (p_y = p_n = 0), where P(y | y or n) is undefined; they are not among "
            f"the {n} items decided."
        )
    caveat = sampling_caveat(results)
    reasons = _reasons(results, gates)
    if reasons:
        head = " ".join(
            ["The run cannot say whether the items satisfy the QQ equality."]
            + [r[0].upper() + r[1:] + "." for r in reasons]
        )
        if n and v["INDETERMINATE"] < n:
            head += f" As measured, {_tally(n, v)}."
        if caveat:
            head += " " + caveat
        return Verdict(head, facts, answered=False)
    head = f"{_tally(n, v)} (ε = {eps})"
    head += (
        f"; {g['CONTEXTUAL']} of {n} {'is' if g['CONTEXTUAL'] == 1 else 'are'} certified contextual."
        if g["CONTEXTUAL"]
        else "; none is certified contextual."
    )
    large = label_effect_line(results, large_only=True)
    if large:
        head += " " + large
    if 2 * n_sat > n:
        head += (
            f" But {n_sat} of {n} items are saturated (near-deterministic answers), so these verdicts "
            "say little about the answer distributions."
        )
    if caveat:
        head += " " + caveat
    return Verdict(head, facts)


def alerts(results: QQResults, gates: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What else went wrong, loudly: gates not run, saturation, memorization. A failed gate (and,
    in a run that answers, saturation) is stated once, in the answer (:func:`verdict`)."""
    n, _, _, n_sat = _counts(results)
    answered = not _reasons(results, gates)
    out = []
    missing = [name for name in ("G1", "G3") if _status(gates[name]) == "NOT_RUN"]
    if missing:
        out.append(
            f"Gate{'s' if len(missing) > 1 else ''} {' and '.join(missing)} {'were' if len(missing) > 1 else 'was'} "
            "not run: this run has no record of that health check."
        )
    if n and 2 * n_sat > n and not answered:
        out.append(
            f"{n_sat} of {n} items are saturated: their answer distributions are near-deterministic, so "
            "the QQ verdicts are weakly informative (the seed's central caveat)."
        )
    mem = results.memorization
    if mem is not None and mem.alert:
        out.append(
            f"Memorization alert: {mem.n_exceeding} of {mem.n_pairs} matched pairs differ in "
            f"OSS by more than {mem.threshold}."
        )
    return out
