"""What the QQ report says first: the verdict (plain sentence, key numbers, whether the run could
answer at all) and the alerts, built from the results and the gates as the report reads them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmaudit.reporting import fmt, num
from lmaudit.reporting.page import Verdict

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


def terms(results: Mapping[str, Any]) -> list[str]:
    """The glossary terms of :data:`TERMS` that apply to this run: item terms only when an item
    was decided, "mapping" only when more than one label mapping was measured."""
    items = [it for it in results.get("items") or [] if isinstance(it, Mapping)]
    mappings = {m.get("mapping") for it in items for m in it.get("mappings") or [] if isinstance(m, Mapping)}
    out = []
    for t in TERMS:
        if (t in _ITEM_TERMS and not items) or (t == "mapping" and len(mappings) < 2):
            continue
        out.append(t)
    return out


def _g(x: Any) -> str:
    return fmt(x, ".3g")


def _status(gate: Mapping[str, Any]) -> str:
    return str(gate.get("status") or "NOT_RUN")


def failed_g3(g3: Mapping[str, Any]) -> tuple[int, int]:
    """``(failed, spot-checked cells)`` of gate G3, each cell decided by its last attempt."""
    final: dict[tuple[Any, ...], bool] = {}
    for c in g3.get("checks") or []:
        final[(c.get("item"), c.get("mapping"), c.get("order"))] = bool(c.get("passed"))
    return sum(not ok for ok in final.values()), len(final)


def _counts(results: Mapping[str, Any]) -> tuple[int, dict[str, int], dict[str, int], int]:
    items = [it for it in results.get("items") or [] if isinstance(it, Mapping)]
    n = int(results.get("n_items") or len(items))
    counts = results.get("counts") or {}
    v = {k: int((counts.get("verdict") or {}).get(k) or 0) for k in VERDICTS}
    if not any(v.values()):  # counts not recorded: count the items
        v = {k: sum(it.get("verdict") == k for it in items) for k in VERDICTS}
    g = {
        k: int((counts.get("gamma_class") or {}).get(k) or 0)
        for k in ("NONCONTEXTUAL", "CONTEXTUAL", "INDETERMINATE")
    }
    n_sat = counts.get("saturated")
    if n_sat is None:
        n_sat = sum(bool(it.get("saturated")) for it in items)
    return n, v, g, int(n_sat)


def _reasons(results: Mapping[str, Any], gates: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Why the run could not answer (empty when it could)."""
    n, v, _, _ = _counts(results)
    out = []
    g1, g2, g3 = gates["G1"], gates["G2"], gates["G3"]
    if _status(g1) == "FAIL":
        out.append(
            f"gate G1 failed: {g1.get('failed')} of {g1.get('checked')} rendered contexts split an answer "
            "label into more than one token, so the label probabilities do not measure the answer"
        )
    median = num(g2.get("median_other"))
    mostly_other = median is not None and median > 0.5
    if _status(g2) == "FAIL":
        out.append(
            f"gate G2 failed: {_g(g2.get('max_other'))} of the mass is off the labels at the worst position "
            f"(G2 needs < {_g(g2.get('threshold'))})"
            + (
                f", and at most positions most of it is (median {_g(median)}: typical of a base model, or "
                "of a prompt that does not elicit a label), so the envelopes are too wide to decide anything"
                if mostly_other
                else f"; the widest q envelope is {_g(g2.get('max_envelope_width'))}"
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
            if isinstance(results.get("sampling_error"), Mapping)
            else "its envelope straddles the margin"
        )
        out.append(f"every one of the {n} items is INDETERMINATE ({why})")
    return out


def sampling_caveat(results: Mapping[str, Any]) -> str | None:
    """What a sampled run's verdicts allow for (None when the probabilities were read, not sampled)."""
    region = results.get("sampling_error")
    if not isinstance(region, Mapping):
        return None
    alpha = num(region.get("alpha"))
    level = "" if alpha is None else f"{1 - alpha:.0%} "
    draws = [num(it.get("min_draws")) for it in region.get("items") or [] if isinstance(it, Mapping)]
    fewest = min((d for d in draws if d is not None), default=None)
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


def _ci(ci: Any, spec: str) -> str:
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return "no interval below two items"
    return f"[{fmt(ci[0], spec)}, {fmt(ci[1], spec)}]"


def _pct_ci(ci: Any) -> str:
    if not isinstance(ci, list | tuple) or len(ci) != 2 or num(ci[0]) is None or num(ci[1]) is None:
        return "no interval"
    return f"[{100 * ci[0]:.1f}%, {100 * ci[1]:.1f}%]"


def across_facts(results: Mapping[str, Any]) -> list[str]:
    """The across-item summaries in a sentence each (``results.summary``; none before it existed)."""
    summ = results.get("summary")
    if not isinstance(summ, Mapping):
        return []
    level = f"{100 * float(summ.get('confidence') or 0.95):g}%"
    aq, sv = summ.get("mean_abs_q") or {}, summ.get("share_violated") or {}
    if not sv.get("n"):
        return ["Across items: no item was analysed, so there is nothing to summarise."]
    out = [
        f"Across the {sv['n']} items analysed: {sv.get('k')} VIOLATED ({100 * float(sv.get('share') or 0):.1f}%, "
        f"{level} Clopper-Pearson interval {_pct_ci(sv.get('ci'))}); mean |q| {fmt(aq.get('mean'))} "
        f"({level} t interval over items {_ci(aq.get('ci'), '.3f')})."
    ]
    line = label_effect_line(results, large_only=False)
    if line:
        out.append(line)
    return out


def label_effect_line(results: Mapping[str, Any], *, large_only: bool) -> str | None:
    """The label-mapping effect (mean |ΔOSS| between mappings) in a sentence; with
    ``large_only``, only when it is large (the lower end of its interval above the threshold)."""
    le = (results.get("summary") or {}).get("label_effect")
    if not isinstance(le, Mapping) or (large_only and not le.get("large")):
        return None
    level = f"{100 * float((results.get('summary') or {}).get('confidence') or 0.95):g}%"
    where = (
        f"mean |ΔOSS| between label mappings {fmt(le.get('mean'))} over {le.get('n')} "
        f"item{'' if le.get('n') == 1 else 's'} ({level} t interval {_ci(le.get('ci'), '.3f')})"
    )
    if le.get("large"):
        return (
            f"The label mapping changes the answers: {where}, above the threshold {_g(le.get('large_threshold'))} "
            "at that level."
        )
    return (
        f"Label-mapping effect: {where}; not shown to exceed the threshold {_g(le.get('large_threshold'))} "
        "(the interval's lower end must)."
    )


def verdict(results: Mapping[str, Any], gates: Mapping[str, Mapping[str, Any]]) -> Verdict:
    """The answer: how many items satisfy, violate or are indeterminate, or why the run cannot say."""
    n, v, g, n_sat = _counts(results)
    params = results.get("params") or {}
    eps = _g(params.get("epsilon"))
    threshold = _g((results.get("saturation") or {}).get("threshold") or params.get("saturation_threshold"))
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
        "G1": f"G1 {_status(g1)} ({g1.get('checked') or 0} rendered contexts checked, {g1.get('failed') or 0} failed)",
        "G2": f"G2 {_status(g2)} (max other mass {_g(g2.get('max_other'))}, must stay below {_g(g2.get('threshold'))})",
        "G3": f"G3 {_status(g3)} ({n3 - bad3} of {n3} spot checks agree)",
    }
    ok = [text for name, text in shown.items() if _status(gates[name]) != "FAIL"]
    if ok:
        facts.append(f"{'Gates' if len(ok) == len(shown) else 'Other gates'}: {'; '.join(ok)}.")
    median = num(g2.get("median_other"))
    if _status(g2) != "FAIL" and not (median is not None and median > 0.5):
        facts.append(
            f"Mass off the labels: at most {_g(g2.get('max_other'))} at any position, median "
            f"{_g(g2.get('median_other'))}; the widest q envelope is {_g(g2.get('max_envelope_width'))}."
        )
    excluded = [x for x in results.get("excluded") or [] if isinstance(x, Mapping)]
    if excluded:
        facts.append(
            f"Excluded: {len(excluded)} item{'' if len(excluded) == 1 else 's'} "
            f"({', '.join(str(x.get('item')) for x in excluded)}) with no probability on either label "
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


def alerts(results: Mapping[str, Any], gates: Mapping[str, Mapping[str, Any]]) -> list[str]:
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
    mem = results.get("memorization")
    if isinstance(mem, Mapping) and mem.get("alert"):
        out.append(
            f"Memorization alert: {mem.get('n_exceeding')} of {mem.get('n_pairs')} matched pairs differ in "
            f"OSS by more than {mem.get('threshold')}."
        )
    return out
