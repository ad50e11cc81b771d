"""The draws study's report: one self-contained ``report.html`` (inline CSS and SVG, no scripts).

The page (:mod:`lmaudit.reporting.page`) leads with the verdict; :func:`render_report` takes the
results dict, the plan (or ``None`` when a measurement file was re-analysed without one), the
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
from lmaudit.reporting.page import MAX_SAMPLES, Sample, Verdict, page_of, provenance, render, value
from lmaudit.studies.draws.bootstrap import CONFIDENCE, N_RESAMPLES
from lmaudit.studies.draws.report.figures import null_svg, rho_curve_svg

__all__ = ["render_report"]

TEMPLATE = "template.html.j2"
QUESTION = (
    "Do a model's sampled answers persist from one draw to the next, beyond what chance ordering gives?"
)


def _families(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    alpha = float(get(results, "params", "alpha") or 0.05)
    out = []
    for i, (name, f) in enumerate(sorted((results.get("families") or {}).items())):
        null = null_svg(f, f"null{i}")
        curve = rho_curve_svg(f, alpha, f"rho{i}")
        out.append(
            {
                "name": name,
                "f": f,
                "null_svg": Markup(null) if null else None,
                "curve_svg": Markup(curve) if curve else None,
                "power": sorted(((float(k), v) for k, v in (f.get("power") or {}).items())),
                "sources": sorted((f.get("sources") or {}).items()),
            }
        )
    return out


def _ci(f: Mapping[str, Any]) -> str:
    """A family's ρ̂ with its bootstrap interval over prompts, as the facts show it."""
    ci = f.get("rho_hat_ci") or {}
    if ci.get("low") is None or ci.get("high") is None:
        why = ci.get("reason")
        return f"ρ̂ = {fmt(f.get('rho_hat'))}" + (f" (no interval: {why})" if why else "")
    level = f"{100 * float(ci.get('confidence') or 0.95):g}%"
    return (
        f"ρ̂ = {fmt(f.get('rho_hat'))}, {level} interval [{fmt(ci['low'])}, {fmt(ci['high'])}] "
        f"({ci.get('method')} bootstrap over {ci.get('n_prompts')} prompts, B = {ci.get('B')})"
    )


def _families_word(n: int) -> str:
    return "family" if n == 1 else "families"


def _log_lead(results: Mapping[str, Any]) -> str:
    """For imported logs, what their users came for first: how many draws are cache copies or
    errors (left out), and which families were generated greedily ("" when neither)."""
    audit = results.get("log_audit") or {}
    totals = audit.get("totals") or {}
    read = sum(int((f.get("counts") or {}).get("draws_read") or 0) for f in audit.get("files") or [])
    parts = []
    copies = int(totals.get("cache_copies") or 0)
    presumed = int(totals.get("presumed_cache_copies") or 0)
    errors = int(totals.get("errors") or 0)
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
    greedy = audit.get("greedy_families") or []
    if greedy:
        out += (" " if out else "") + (
            f"{', '.join(greedy)} {'was' if len(greedy) == 1 else 'were'} generated greedily (temperature 0 "
            "or no do_sample): repeats are not draws."
        )
    return out


def _without_flagged(fams: Mapping[str, Mapping[str, Any]]) -> tuple[int, int, list[str]]:
    """``(families rejecting, families with a source left, families with none left)`` once the
    flagged sources are dropped (a family with no flagged source keeps its registered result)."""
    k = n = 0
    emptied = []
    for name, f in sorted(fams.items()):
        wf = f.get("without_flagged")
        if wf is not None and not wf.get("n_sequences"):
            emptied.append(name)
            continue
        n += 1
        k += bool((wf or f).get("reject"))
    return k, n, emptied


def _verdict(results: Mapping[str, Any]) -> Verdict:
    fams = results.get("families") or {}
    alpha = get(results, "params", "alpha") or 0.05
    lead = _log_lead(results)
    prefix = lead + " " if lead else ""
    if not fams:
        return Verdict(prefix + "Nothing was analysed: the run holds no sequences.", answered=False)
    n, k = len(fams), int(results.get("n_rejected") or 0)
    level = f"Holm-corrected across {n} families at α = {alpha:g}" if n > 1 else f"at α = {alpha:g}"
    facts = [
        f"{name}: {'persistence' if f.get('reject') else 'not rejected'}; T = {fmt(f.get('T'), '.2f')}, "
        f"{'Holm p' if n > 1 else 'p'} = {pval(f.get('holm_p'))}, {_ci(f)}, ρ_upper {f.get('rho_upper_label', '—')}, "
        f"{f.get('n_informative', 0)} of {f.get('n_sequences', 0)} sequences informative"
        for name, f in sorted(fams.items())
    ]
    facts += [  # imported scores: their error bars, clustered by sample (the dependence epochs carry)
        f"{name}, {task}: {e.get('sentence')}."
        for name, tasks in sorted((results.get("error_bars") or {}).items())
        for task, e in sorted(tasks.items())
        if e.get("sentence")
    ]
    if all(not f.get("n_informative") for f in fams.values()):
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
    if not results.get("any_flagged"):
        return Verdict(prefix + head, facts)
    flagged = sorted(f"{s} in {name}" for name, f in fams.items() for s in f.get("flagged_sources") or [])
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


def _alerts(results: Mapping[str, Any]) -> list[str]:
    data = results.get("data") or {}
    out = []
    refused = data.get("refused") or {}
    if refused.get("sequences"):
        out.append(
            f"The server refused {refused['draws']} draw(s) in {refused['sequences']} sequence(s) "
            f"({value(refused.get('reasons'))}): those sequences are counted here and left out of every "
            "test below; they were not cached and are asked again by the next run."
        )
    # rebuilt-looking sources, cache copies, errors and greedy families are stated in the answer
    return out + log_alerts(results.get("log_audit"), in_answer=True)


def _terms(results: Mapping[str, Any]) -> list[str]:
    """The glossary terms that apply: none without a family, Holm only across several, ρ only
    when some sequence is informative."""
    fams = results.get("families") or {}
    if not fams:
        return []
    out = ["R / E0 / T"]
    if len(fams) > 1:
        out.append("Holm")
    if any(f.get("n_informative") for f in fams.values()):
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


def render_report(
    *,
    results: Mapping[str, Any],
    plan: Mapping[str, Any] | None,
    audit: Mapping[str, Any] | None,
    rows: Iterable[Mapping[str, Any]] = (),
) -> str:
    audit = audit or {}
    imported = results.get("mode") == "import"
    model = "not used (imported draws)" if imported else get(plan, "config", "model", "name")
    rows_prov = [
        ("Study", results.get("study")),
        ("Mode", results.get("mode")),
        ("Model", model),
        ("Backend identity digest", get(audit, "measure", "backend_digest")),
        ("Import file", get(plan, "inputs", "import", "path")),
        ("Import SHA-256", get(plan, "inputs", "import", "sha256")),
        *([("Import format", fmt)] if (fmt := get(plan, "inputs", "import", "format")) else []),
        ("Probes SHA-256", get(plan, "inputs", "probes", "sha256")),
        ("Plan digest", get(plan, "plan_digest") or audit.get("plan_digest")),
        ("Measurements SHA-256", get(results, "source", "measurements_sha256")),
        ("Normalisation", results.get("normalise")),
        # the run is logged to MLflow after the report is written: its name, not its id
        ("MLflow run", get(audit, "mlflow", "run_name")),
        ("MLflow experiment", get(audit, "mlflow", "experiment")),
        ("lmaudit version (run)", audit.get("lmaudit_version")),
        ("Planned (UTC)", get(audit, "plan", "written_utc")),
        ("Measured (UTC)", get(audit, "measure", "finished_utc")),
        ("Analysed (UTC)", get(audit, "analyze", "finished_utc")),
    ]
    samples, total = _samples(rows, plan)
    n = results.get("n_families", 0)
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
        samples=samples,
        samples_total=total,
        samples_note="Each sequence: the probe as asked (the conversation before it) and the draws in order.",
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
        params=results.get("params") or {},
        data=results.get("data") or {},
        sources=results.get("sources") or [],
        log_audit=results.get("log_audit"),
        ci_level=f"{100 * CONFIDENCE:g}%",
        ci_b=N_RESAMPLES,
    )
