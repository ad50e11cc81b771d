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
from lmaudit.studies.draws.figures import null_svg, rho_curve_svg

__all__ = ["render_report"]

TEMPLATE = "report_template.html.j2"
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


def _verdict(results: Mapping[str, Any]) -> Verdict:
    fams = results.get("families") or {}
    alpha = get(results, "params", "alpha") or 0.05
    if not fams:
        return Verdict("Nothing was analysed: the run holds no sequences.", answered=False)
    facts = [
        f"{name}: {'persistence' if f.get('reject') else 'not rejected'}; T = {fmt(f.get('T'), '.2f')}, "
        f"Holm p = {pval(f.get('holm_p'))}, ρ̂ = {fmt(f.get('rho_hat'))}, ρ_upper {f.get('rho_upper_label', '—')}, "
        f"{f.get('n_informative', 0)} of {f.get('n_sequences', 0)} sequences informative"
        for name, f in sorted(fams.items())
    ]
    if all(not f.get("n_informative") for f in fams.values()):
        return Verdict(
            "Every sequence repeats one answer throughout, so ordering carries no information: the test "
            "cannot tell persistence from a fixed answer.",
            facts,
            answered=False,
        )
    n, k = len(fams), int(results.get("n_rejected") or 0)
    if k:
        head = (
            f"Answers persist from draw to draw in {k} of {n} "
            f"{'family' if n == 1 else 'families'} (Holm-corrected at α = {alpha:g})."
        )
    else:
        head = (
            f"No persistence found: none of the {n} {'family' if n == 1 else 'families'} rejects "
            f"chance ordering at α = {alpha:g} after Holm (see ρ_upper for how much persistence is ruled out)."
        )
    return Verdict(head, facts)


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
    if results.get("any_flagged"):
        out.append(
            "Some sources look rebuilt (more fully grouped sequences than chance gives): the result "
            "without them is shown beside the registered one."
        )
    return out + log_alerts(results.get("log_audit"))


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
        terms=["R / E0 / T", "Holm", "ρ̂ / ρ_upper"],
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
    )
