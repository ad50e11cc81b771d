"""What the choir report says first: the verdict (a plain sentence and the numbers behind it, or
why the run could not answer) and the alerts (what went wrong, loudly)."""

from __future__ import annotations

from lmaudit.reporting import fmt, interval_text, pval
from lmaudit.reporting.page import Verdict, value
from lmaudit.studies.choir.results import ChoirResults, LlmExtraction, Recovery

__all__ = ["alerts", "verdict"]


def _of(k: int, n: int) -> str:
    return f"{k} of {n}"


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _at(alpha: float | None) -> str:
    return f"α = {alpha:g}" if alpha is not None else "the study's α"


def _recover_fact(name: str, r: Recovery) -> str:
    band = r.null_interval
    return (
        f"{name} recoverable from the lists at accuracy {fmt(r.accuracy)} "
        f"{interval_text(r.interval, missing='(no bootstrap interval: n_boot = 0)')} against chance {fmt(r.chance)} (shuffle-null band "
        f"{fmt(band.lo if band else None)} to {fmt(band.hi if band else None)}, p = {pval(r.p)})"
    )


def facts(results: ChoirResults, alpha: float | None) -> list[str]:
    """The numbers behind the verdict, each a plain line."""
    s = results.across_questions
    d = results.design
    out = [
        f"{s.n_questions} questions, {len(d.models)} members ({', '.join(d.models) or 'none'}), "
        f"conditions {', '.join(d.conditions) or 'none'}: {d.lists} lists ({d.empty_lists} empty)."
    ]
    if s.n_questions:
        out.append(
            f"Above-chance agreement (STC > 1): {_of(s.above_chance, s.n_questions)} questions "
            f"({s.n_stc} with a signal-to-chance; {s.above_chance_significant} at p < {_at(alpha)})."
        )
    if s.n_lift:
        out.append(
            f"Persona lift > 1 (same-persona agreement above unconditioned): "
            f"{_of(s.lift_up, s.n_lift)} questions (mean relative lift {fmt(s.mean_relative_lift)})."
        )
    if s.n_template_novelty:  # only when both templates were run
        out.append(
            "Template B naming more than 50% concepts template A does not: "
            f"{_of(s.novelty_over_half, s.n_template_novelty)} questions."
        )
    rec = results.recoverability
    for key, name in (
        ("model", "Member"),
        ("persona", "Persona"),
        ("persona_within_model_loqo", "Persona within member"),
    ):
        if key in rec:
            out.append(_recover_fact(name, rec[key]) + ".")
    if results.ranking is not None:
        rank = results.ranking.summary
        out.append(
            "Source-blind ranking: the conditioned cohort advanced conditioned-source pools in "
            f"{_of(rank.conditioned_cohort.count, rank.conditioned_cohort.n)} questions, the "
            f"unconditioned cohort in {_of(rank.unconditioned_cohort.count, rank.unconditioned_cohort.n)}; "
            f"the cohorts agree on the top candidate in {_of(rank.agree_top.count, rank.agree_top.n)}."
        )
    return out


def _unanswerable(results: ChoirResults) -> str | None:
    """Why the run could not answer, or None when it could."""
    d = results.design
    n_lists, n_empty, n_refused = d.lists, d.empty_lists, d.refused_lists.n
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
            f"({value(d.refused_lists.reasons)}), so the lists compared are not the whole design. The numbers "
            "below are from the lists that came back; the next run asks the refused ones again."
        )
    if not results.across_questions.n_stc:
        return (
            "No question has a signal-to-chance: each needs unconditioned lists from at least two members "
            "(and shuffles > 0), so agreement cannot be told from chance."
        )
    return None


def verdict(results: ChoirResults, alpha: float | None) -> Verdict:
    """The answer to the study's question, from the results alone (and the study's α)."""
    why = _unanswerable(results)
    if why is not None:
        return Verdict(why, facts(results, alpha), answered=False)
    s = results.across_questions
    n, k, sig = s.n_questions, s.above_chance, s.above_chance_significant
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
    model = results.recoverability.get("model")
    if model is not None:
        hi = model.null_interval.hi if model.null_interval else None
        beyond = hi is not None and model.accuracy > hi
        head += (
            f", and each member's lists {'identify' if beyond else 'do not identify'} the member beyond the "
            f"shuffle null (accuracy {fmt(model.accuracy)}, chance {fmt(model.chance)})"
        )
    return Verdict(head + ".", facts(results, alpha))


def alerts(results: ChoirResults) -> list[str]:
    """What went wrong, each one line the reader cannot miss."""
    d = results.design
    s = results.across_questions
    out = []
    if d.refused_lists.n:
        out.append(
            f"The server refused {d.refused_lists.n} generation(s) ({value(d.refused_lists.reasons)}): they are "
            "counted here, left out of every list statistic below, and asked again by the next run (never cached)."
        )
    if 0 < d.empty_lists < d.lists:
        out.append(f"{d.empty_lists} of {d.lists} lists are empty (no item extracted): they name no concept.")
    if d.degenerate_items:
        out.append(
            f"{d.degenerate_items} list item(s) ran into a degenerate repetition (one character or word "
            "repeated over and over, decoding that looped): extraction dropped them; the raw answers are "
            "shown below."
        )
    ext = d.extraction
    if isinstance(ext, LlmExtraction) and ext.invalid:
        out.append(
            f"The extractor model's reply was invalid for {ext.invalid} of {ext.lists} lists "
            f"(on_invalid: {ext.on_invalid}): "
            + ("their items are the rule extractor's." if ext.on_invalid == "rule" else "they have no items.")
        )
    n_q, n_stc = s.n_questions, s.n_stc
    if 0 < n_stc < n_q:
        out.append(
            f"{n_q - n_stc} of {n_q} questions have no signal-to-chance (fewer than two members with "
            "unconditioned lists): they count against the above-chance share."
        )
    rank = results.ranking.summary if results.ranking else None
    if rank is not None and rank.n_invalid:
        out.append(
            f"{rank.n_invalid} of {rank.n_ballots} ranking ballots are invalid and were not scored "
            f"({value(rank.invalid_by_error)})."
        )
    return out
