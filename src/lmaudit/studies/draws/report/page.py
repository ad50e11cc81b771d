"""The draws study's report: one self-contained ``report.html`` (inline CSS and SVG, no scripts).

The page (:mod:`lmaudit.reporting.page`) leads with the verdict; :func:`render_report` takes the
typed results (:class:`..results.DrawsResults`), the plan (or ``None`` when a measurement file was re-analysed without one), the
audit record and the measurement rows, and returns the page (the pipeline writes it). Text is
escaped by Jinja2's autoescape; the figures are matplotlib's SVG (:mod:`.figures`), which
escapes its text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from markupsafe import Markup

from lmaudit.reporting import fmt, get, pval, text
from lmaudit.reporting.log_audit import log_alerts
from lmaudit.reporting.page import (
    MAX_SAMPLES,
    Sample,
    Samples,
    Verdict,
    page_of,
    provenance,
    render,
    run_record_rows,
    value,
)
from lmaudit.studies.draws.bootstrap import CONFIDENCE, N_RESAMPLES
from lmaudit.studies.draws.report.figures import null_svg, rho_curve_svg
from lmaudit.studies.draws.results import DrawsResults, Family
from lmaudit.studies.layout import ReportInputs

__all__ = ["render_report"]

TEMPLATE = "template.html.j2"
QUESTION = (
    "Do a model's sampled answers persist from one draw to the next, beyond what chance ordering gives?"
)


def _families(results: DrawsResults) -> list[dict[str, Any]]:
    alpha = results.params.alpha
    out = []
    for i, (name, f) in enumerate(sorted(results.families.items())):
        null = null_svg(f, f"null{i}")
        curve = rho_curve_svg(f, alpha, f"rho{i}")
        out.append(
            {
                "name": name,
                "f": f,
                "null_svg": Markup(null) if null else None,
                "curve_svg": Markup(curve) if curve else None,
                "power": f.power_by_rho(),
                "sources": sorted(f.sources.items()),
            }
        )
    return out


def _ci(f: Family) -> str:
    """A family's ρ̂ with its bootstrap interval over prompts, as the facts show it."""
    ci = f.rho_hat_ci
    if ci.interval is None:
        return f"ρ̂ = {fmt(f.rho_hat)}" + (f" (no interval: {ci.reason})" if ci.reason else "")
    level = f"{100 * ci.confidence:g}%"
    return (
        f"ρ̂ = {fmt(f.rho_hat)}, {level} interval [{fmt(ci.interval.lo)}, {fmt(ci.interval.hi)}] "
        f"({ci.method} bootstrap over {ci.n_prompts} prompts, B = {ci.B})"
    )


def _families_word(n: int) -> str:
    return "family" if n == 1 else "families"


def _log_lead(results: DrawsResults) -> str:
    """For imported logs, what their users came for first: how many draws are cache copies or
    errors (left out), and which families were generated greedily ("" when neither)."""
    audit = results.log_audit
    if audit is None:
        return ""
    read = audit.draws_read
    parts = []
    copies = audit.totals.get("cache_copies", 0)
    presumed = audit.totals.get("presumed_cache_copies", 0)
    errors = audit.totals.get("errors", 0)
    if copies:
        parts.append(
            f"{copies} of {read} draws in the imported logs are cache copies (served from a cache, not drawn)"
        )
    if presumed:
        parts.append(
            f"{presumed} of {read} are presumed cache copies (a shared cache and no model call recorded)"
        )
    if errors:
        parts.append(f"{errors} of {read} are errors")
    out = "; ".join(parts) + ": left out of every test below." if parts else ""
    greedy = audit.greedy_families
    if greedy:
        out += (" " if out else "") + (
            f"{', '.join(greedy)} {'was' if len(greedy) == 1 else 'were'} generated greedily (temperature 0 "
            "or no do_sample): repeats are not draws."
        )
    return out


def _without_flagged(fams: Mapping[str, Family]) -> tuple[int, int, list[str]]:
    """``(families rejecting, families with a source left, families with none left)`` once the
    flagged sources are dropped (a family with no flagged source keeps its registered result)."""
    k = n = 0
    emptied = []
    for name, f in sorted(fams.items()):
        if f.emptied:
            emptied.append(name)
            continue
        n += 1
        k += f.reject_without_flagged
    return k, n, emptied


def _verdict(results: DrawsResults) -> Verdict:
    fams = results.families
    alpha = results.params.alpha
    lead = _log_lead(results)
    prefix = lead + " " if lead else ""
    if not fams:
        return Verdict(prefix + "Nothing was analysed: the run holds no sequences.", answered=False)
    n, k = len(fams), results.n_rejected
    level = f"Holm-corrected across {n} families at α = {alpha:g}" if n > 1 else f"at α = {alpha:g}"
    facts = [
        f"{name}: {'persistence' if f.reject else 'not rejected'}; T = {fmt(f.T, '.2f')}, "
        f"{'Holm p' if n > 1 else 'p'} = {pval(f.holm_p)}, {_ci(f)}, ρ_upper {f.rho_upper_label}, "
        f"{f.n_informative} of {f.n_sequences} sequences informative"
        for name, f in sorted(fams.items())
    ]
    # imported scores: their error bars, clustered by sample (the dependence epochs carry)
    facts += [f"{name}, {task}: {e.sentence}." for name, task, e in results.error_bar_entries() if e.sentence]
    if all(not f.n_informative for f in fams.values()):
        return Verdict(
            prefix
            + "No sequence left has two different answers, so ordering carries no information: the test "
            "cannot tell persistence from a fixed answer.",
            facts,
            answered=False,
        )
    if k:
        head = f"Answers persist from draw to draw in {k} of {n} {_families_word(n)} ({level})."
    else:
        head = (
            f"No persistence found: none of the {n} {_families_word(n)} rejects chance ordering ({level}; "
            "see ρ_upper for how much persistence is ruled out)."
        )
    if not results.any_flagged:
        return Verdict(prefix + head, facts)
    flagged = sorted(f"{s} in {name}" for name, s in results.flagged)
    why = (
        f"{', '.join(flagged)} {'has' if len(flagged) == 1 else 'have'} more fully grouped sequences (AAABBB) "
        "than chance gives, which strong persistence and sequences rebuilt from a distribution both produce"
    )
    k_wo, n_wo, emptied = _without_flagged(fams)
    if k_wo == k and n_wo == n:
        return Verdict(f"{prefix}{head[:-1]}, with or without the flagged sources ({why}).", facts)
    rest = (
        f"without them, {k_wo} of {n_wo} {_families_word(n_wo)} with a source left "
        f"{'rejects' if k_wo == 1 else 'reject'}"
        if n_wo
        else "without them, no family has a source left"
    )
    if emptied and n_wo:
        rest += f" (no source is left in {', '.join(emptied)} after dropping flagged ones)"
    return Verdict(
        f"{prefix}The registered test rejects chance ordering in {k} of {n} {_families_word(n)} ({level}), "
        f"but {why}; {rest}, so the run cannot tell persistence from rebuilt sequences there.",
        facts,
        answered=False,
    )


def _alerts(results: DrawsResults) -> list[str]:
    out = []
    refused = results.data.refused
    if refused.sequences:
        out.append(
            f"The server refused {refused.draws} draw(s) in {refused.sequences} sequence(s) "
            f"({value(refused.reasons)}): those sequences are counted here and left out of every "
            "test below; they were not cached and are asked again by the next run."
        )
    # rebuilt-looking sources, cache copies, errors and greedy families are stated in the answer;
    # the rest of what the logs get wrong in the words every study that reads logs shares
    audit = results.log_audit
    return out + log_alerts(audit, in_answer=True)


def _terms(results: DrawsResults) -> list[str]:
    """The glossary terms that apply: none without a family, Holm only across several, ρ only
    when some sequence is informative."""
    fams = results.families
    if not fams:
        return []
    out = ["R / E0 / T"]
    if len(fams) > 1:
        out.append("Holm")
    if any(f.n_informative for f in fams.values()):
        out.append("ρ̂ / ρ_upper")
    return out


def _samples(rows: Iterable[Mapping[str, Any]], plan: Mapping[str, Any] | None) -> tuple[list[Sample], int]:
    """Each sampled (or imported) sequence: its probe's prompt and its draws in order."""
    prompts = {
        (r["meta"].get("condition"), r["meta"].get("probe"), r["meta"].get("replicate")): r["messages"]
        for r in (get(plan, "requests") or [])
        if isinstance(r, Mapping) and isinstance(r.get("meta"), Mapping)
    }
    out: list[Sample] = []
    total = 0
    for row in rows:
        if row.get("kind", "sequence") not in ("sequence", "refused"):
            continue
        total += 1
        if len(out) >= MAX_SAMPLES:
            continue
        key = (row.get("condition"), row.get("probe"), row.get("replicate"))
        messages = prompts.get(key) or []
        prompt = "\n".join(f"[{m.get('role')}] {m.get('content')}" for m in messages) or (
            "not recorded (imported draws: the prompt is the source's)"
        )
        refused = row.get("kind") == "refused"
        draws = row.get("refusals") if refused else row.get("draws")
        answer = " → ".join(str(d) for d in draws or []) if not refused else "refused: " + value(draws)
        out.append(
            Sample(
                id=f"{row.get('family')} · {row.get('probe')} · {row.get('condition')} · r{row.get('replicate', 0)}",
                title=str(messages[-1].get("content")) if messages else str(row.get("probe")),
                prompt=prompt,
                answer=answer,
                facts=[("source", str(row.get("source"))), ("seed", text(row.get("seed")))],
                flagged=refused,
            )
        )
    return out, total


def render_report(inputs: ReportInputs[DrawsResults]) -> str:
    """The report page as a string (the pipeline writes it, atomically)."""
    results, plan, audit, rows = inputs.results, inputs.plan, inputs.audit, inputs.rows
    imported = results.mode == "import"
    model = "not used (imported draws)" if imported else get(plan, "config", "model", "name")
    rows_prov = [
        ("Study", results.study),
        ("Mode", results.mode),
        ("Model", model),
        ("Backend identity digest", get(audit, "measure", "backend_digest")),
        ("Import file", get(plan, "inputs", "import", "path")),
        ("Import SHA-256", get(plan, "inputs", "import", "sha256")),
        *([("Import format", fmt)] if (fmt := get(plan, "inputs", "import", "format")) else []),
        ("Probes SHA-256", get(plan, "inputs", "probes", "sha256")),
        ("Plan digest", get(plan, "plan_digest") or audit.get("plan_digest")),
        ("Measurements SHA-256", results.source.measurements_sha256 if results.source else None),
        ("Normalisation", results.normalise.to_json() if results.normalise else None),
        *run_record_rows(audit),
    ]
    samples, total = _samples(rows, plan)
    n = results.n_families
    page = page_of(
        results,
        plan,
        study="draws",
        title=f"Draw-to-draw persistence: {n} {'family' if n == 1 else 'families'}"
        + (f" ({model})" if model and not imported else ""),
        question=QUESTION,
        verdict=_verdict(results),
        alerts=_alerts(results),
        terms=_terms(results),
        samples=Samples(
            samples,
            total,
            "Each sequence: the probe as asked (the conversation before it) and the draws in order.",
        ),
        provenance=provenance(rows_prov),
    )
    families = _families(results)
    return render(
        __package__,
        TEMPLATE,
        page,
        results=results,
        families=families,
        power_rhos=sorted({r for fam in families for r, _ in fam["power"]}),
        params=results.params,
        data=results.data,
        sources=results.sources,
        log_audit=results.log_audit,
        ci_level=f"{100 * CONFIDENCE:g}%",
        ci_b=N_RESAMPLES,
    )
