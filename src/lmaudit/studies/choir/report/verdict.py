"""What the choir report says first: the verdict (a plain sentence and the numbers behind it, or
why the run could not answer) and the alerts (what went wrong, loudly)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmaudit.reporting import fmt, get, pval
from lmaudit.reporting.page import Verdict, value

__all__ = ["alerts", "verdict"]


def _of(k: Any, n: Any) -> str:
    return f"{k} of {n}"


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _at(alpha: float | None) -> str:
    return f"α = {alpha:g}" if alpha is not None else "the study's α"


def _recover_fact(name: str, r: Mapping[str, Any]) -> str:
    band = r.get("null_band") or [None, None]
    return (
        f"{name} recoverable from the lists at accuracy {fmt(r.get('accuracy'))} "
        f"[{fmt((r.get('ci') or [None])[0])}, {fmt((r.get('ci') or [None, None])[1])}] against chance "
        f"{fmt(r.get('chance'))} (shuffle-null band {fmt(band[0])} to {fmt(band[1])}, p = {pval(r.get('p'))})"
    )


def facts(results: Mapping[str, Any], alpha: float | None) -> list[str]:
    """The numbers behind the verdict, each a plain line."""
    s = results.get("summary") or {}
    d = results.get("design") or {}
    models = d.get("models") or []
    out = [
        f"{s.get('n_questions', 0)} questions, {len(models)} members ({', '.join(models) or 'none'}), "
        f"conditions {', '.join(d.get('conditions') or []) or 'none'}: {d.get('lists', 0)} lists "
        f"({d.get('empty_lists', 0)} empty)."
    ]
    if s.get("n_questions"):
        out.append(
            f"Above-chance agreement (STC > 1): {_of(s.get('above_chance'), s.get('n_questions'))} questions "
            f"({s.get('n_stc')} with a signal-to-chance; {s.get('above_chance_significant')} at p < {_at(alpha)})."
        )
    if s.get("n_lift"):
        out.append(
            f"Persona lift > 1 (same-persona agreement above unconditioned): "
            f"{_of(s.get('lift_up'), s.get('n_lift'))} questions (mean relative lift "
            f"{fmt(s.get('mean_relative_lift'))})."
        )
    if s.get("n_template_novelty"):  # only when both templates were run
        out.append(
            "Template B naming more than 50% concepts template A does not: "
            f"{_of(s.get('novelty_over_half'), s.get('n_template_novelty'))} questions."
        )
    rec = results.get("recoverability") or {}
    for key, name in (
        ("model", "Member"),
        ("persona", "Persona"),
        ("persona_within_model_loqo", "Persona within member"),
    ):
        if key in rec:
            out.append(_recover_fact(name, rec[key]) + ".")
    rank = get(results, "ranking", "summary")
    if rank:
        out.append(
            "Source-blind ranking: the conditioned cohort advanced conditioned-source pools in "
            f"{_of(rank['conditioned_cohort']['count'], rank['conditioned_cohort']['n'])} questions, the "
            f"unconditioned cohort in {_of(rank['unconditioned_cohort']['count'], rank['unconditioned_cohort']['n'])}; "
            f"the cohorts agree on the top candidate in {_of(rank['agree_top']['count'], rank['agree_top']['n'])}."
        )
    return out


def _unanswerable(results: Mapping[str, Any]) -> str | None:
    """Why the run could not answer, or None when it could."""
    d = results.get("design") or {}
    s = results.get("summary") or {}
    refused = d.get("refused_lists") or {}
    n_lists, n_empty, n_refused = d.get("lists") or 0, d.get("empty_lists") or 0, refused.get("n") or 0
    if not n_lists:
        why = f": the server refused all {n_refused} generations" if n_refused else ""
        return f"No list was analysed{why}."
    if n_empty >= n_lists:
        return (
            f"Every one of the {n_lists} lists came back empty (no item extracted): there is nothing to "
            "compare across members."
        )
    if n_refused:
        return (
            f"The run is incomplete: the server refused {n_refused} of {n_refused + n_lists} generations "
            f"({value(refused.get('reasons'))}), so the lists compared are not the whole design. The numbers "
            "below are from the lists that came back; the next run asks the refused ones again."
        )
    if not s.get("n_stc"):
        return (
            "No question has a signal-to-chance: each needs unconditioned lists from at least two members "
            "(and shuffles > 0), so agreement cannot be told from chance."
        )
    return None


def verdict(results: Mapping[str, Any], alpha: float | None) -> Verdict:
    """The answer to the study's question, from the results alone (and the study's α)."""
    why = _unanswerable(results)
    if why is not None:
        return Verdict(why, facts(results, alpha), answered=False)
    s = results["summary"]
    n, k, sig = s["n_questions"], s["above_chance"], s["above_chance_significant"]
    if sig:
        head = (
            f"The members agree beyond chance on {sig} of {n} {_plural(n, 'question', 'questions')} "
            f"(signal-to-chance above 1 and significant at {_at(alpha)}; above 1 on {k})"
        )
    else:
        head = (
            f"No question shows agreement beyond chance at {_at(alpha)} ({k} of {n} "
            f"{_plural(n, 'question', 'questions')} with signal-to-chance above 1, none significant)"
        )
    model = (results.get("recoverability") or {}).get("model")
    if model and model.get("accuracy") is not None:
        hi = (model.get("null_band") or [None, None])[1]
        beyond = hi is not None and model["accuracy"] > hi
        head += (
            f", and each member's lists {'identify' if beyond else 'do not identify'} the member beyond the "
            f"shuffle null (accuracy {fmt(model['accuracy'])}, chance {fmt(model.get('chance'))})"
        )
    return Verdict(head + ".", facts(results, alpha))


def alerts(results: Mapping[str, Any]) -> list[str]:
    """What went wrong, each one line the reader cannot miss."""
    d = results.get("design") or {}
    s = results.get("summary") or {}
    out = []
    refused = d.get("refused_lists") or {}
    if refused.get("n"):
        out.append(
            f"The server refused {refused['n']} generation(s) ({value(refused.get('reasons'))}): they are "
            "counted here, left out of every list statistic below, and asked again by the next run (never cached)."
        )
    n_lists, n_empty = d.get("lists") or 0, d.get("empty_lists") or 0
    if 0 < n_empty < n_lists:
        out.append(f"{n_empty} of {n_lists} lists are empty (no item extracted): they name no concept.")
    if d.get("degenerate_items"):
        out.append(
            f"{d['degenerate_items']} list item(s) ran into a degenerate repetition (one character or word "
            "repeated over and over, decoding that looped): extraction dropped them; the raw answers are "
            "shown below."
        )
    ext = d.get("extraction") or {}
    if ext.get("invalid"):
        out.append(
            f"The extractor model's reply was invalid for {ext['invalid']} of {ext.get('lists')} lists "
            f"(on_invalid: {ext.get('on_invalid')}): "
            + (
                "their items are the rule extractor's."
                if ext.get("on_invalid") == "rule"
                else "they have no items."
            )
        )
    n_q, n_stc = s.get("n_questions") or 0, s.get("n_stc") or 0
    if 0 < n_stc < n_q:
        out.append(
            f"{n_q - n_stc} of {n_q} questions have no signal-to-chance (fewer than two members with "
            "unconditioned lists): they count against the above-chance share."
        )
    rank = get(results, "ranking", "summary")
    if rank and rank.get("n_invalid"):
        out.append(
            f"{rank['n_invalid']} of {rank['n_ballots']} ranking ballots are invalid and were not scored "
            f"({value(rank.get('invalid_by_error'))})."
        )
    return out
