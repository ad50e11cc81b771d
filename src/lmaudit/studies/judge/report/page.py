"""The judge study's report: one self-contained ``report.html`` (inline CSS and SVG, no scripts).

The page (:mod:`lmaudit.reporting.page`) leads with the verdict (:mod:`.verdict`); the study's
sections follow (the disagreement table with exact intervals, the wrapper patterns, the
condition summaries, the per-prompt grid, the classification, the confidence distributions,
the log-prob readout, model wins after unblinding, output validity), then every prompt as the
judge saw it with its verdicts (:mod:`.samples`), and provenance. :func:`render_report` takes
the results, the plan (``None`` when a measurement file was re-analysed without one), the audit
record and the measurement rows. Text is escaped by Jinja2's autoescape; the figures are
matplotlib's SVG (:mod:`.figures`), which escapes its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from lmaudit.reporting import get
from lmaudit.reporting.page import Samples, page_of, provenance, render, run_record_rows
from lmaudit.studies.judge.report.figures import confidence_svg, disagreement_svg, order_swap_svg
from lmaudit.studies.judge.report.order_swap import table as order_swap_table
from lmaudit.studies.judge.report.samples import questions, samples
from lmaudit.studies.judge.report.verdict import alerts, verdict
from lmaudit.studies.layout import ReportInputs

if TYPE_CHECKING:
    from lmaudit.studies.judge.results import JudgeResults

__all__ = ["render_report"]

TEMPLATE = "template.html.j2"
QUESTION = (
    "Does a content-preserving change of presentation (a boundary wrapper around a response, or the "
    "responses' order) change an LLM judge's pairwise verdict?"
)
IMPORT_QUESTION = (
    "Does the order in which two answers are shown change an LLM judge's pairwise verdict (position bias), "
    "as the imported file records it?"
)
FROZEN = (
    "packets, rubric and analysis plan in artifacts/manifest.json before judging; completed results in "
    "artifacts/result_manifest.json; the model mapping is digested, never shown to the judge"
)


def _inputs(plan: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """The plan's input files, one row per path and digest."""
    rows: list[tuple[str, Any]] = []
    inputs = get(plan, "inputs") or {}
    for name, v in sorted(inputs.items()):  # by name: the plan as built and as read back agree
        if name == "packets" and isinstance(v, Mapping):
            rows += [(f"Packet {cid} SHA-256", d) for cid, d in sorted(v.items())]
        elif name == "import" and isinstance(v, Mapping):
            for cid, f in sorted(v.items()):
                rows += [
                    (f"Import file ({cid})", get(f, "path")),
                    (f"Import SHA-256 ({cid})", get(f, "sha256")),
                ]
        elif isinstance(v, Mapping):
            label = name.replace("_", " ").capitalize()
            if "path" in v:
                rows.append((f"{label} file", v.get("path")))
            rows.append((f"{label} SHA-256", v.get("sha256")))
        else:
            rows.append((name, v))
    return rows


def _provenance(
    results: JudgeResults, plan: Mapping[str, Any] | None, audit: Mapping[str, Any]
) -> list[tuple[str, str]]:
    design = results.design
    sampling = {
        k: v
        for k, v in (
            ("temperature", design.temperature),
            ("top_p", design.top_p),
            ("max_tokens", design.max_tokens),
            ("max_attempts", design.max_attempts),
        )
        if v is not None
    }
    execution = design.execution or {}
    judge = design.judge
    reg = results.prereg
    rows: list[tuple[str, Any]] = [
        ("Study", results.study),
        ("Mode", results.mode),
        ("Judge", judge.name if judge else execution.get("judge")),
        (
            "Judge identity digest",
            judge.identity_digest if judge else get(audit, "measure", "backend_digest"),
        ),
        ("Isolation", design.isolation),
        ("Judgments per prompt and condition (k)", results.k),
        ("Seed (judgment seeds derive from it)", design.seed),
        ("Seed rule", design.seed_rule),
        ("Sampling", sampling or None),
        ("Rubric SHA-256", design.rubric_sha256),
        ("Log-prob readout", design.readout),
        *(
            [("Import folder", design.import_dir), ("Execution record", design.execution)]
            if results.mode == "import" and not design.format
            else []
        ),
        *(
            [
                ("Import file", design.import_path),
                ("Import format", design.format),
                ("Execution record", design.execution),
            ]
            if design.format
            else []
        ),
        ("Mapping file", results.mapping.path if results.mapping else None),
        *_inputs(plan),
        *([("Frozen protocol", FROZEN)] if results.mode == "judge" else []),
        ("Plan digest", get(plan, "plan_digest") or audit.get("plan_digest")),
        ("Measurements SHA-256", results.source.measurements_sha256 if results.source else None),
    ]
    if reg is not None:
        rows += [
            ("Registration", reg.name),
            ("Registration frozen (UTC)", reg.frozen_utc),
            ("Registration file SHA-256", reg.registration_file.sha256),
        ]
    rows += run_record_rows(audit)
    unique: dict[tuple[str, str], tuple[str, Any]] = {}
    for label, v in rows:  # the plan's inputs repeat some of the results' rows
        unique.setdefault((label, str(v)), (label, v))
    return provenance(unique.values())


def _classes(results: JudgeResults) -> dict[str, str]:
    """Each prompt's classes over its replicates: the class, how many replicates, and which."""
    out = {}
    for it in results.items:
        if not it.classification:
            continue
        by: dict[str, list[int]] = {}
        for r, c in enumerate(it.classification):
            by.setdefault(c, []).append(r)
        if len(it.classification) == 1:
            out[it.item] = next(iter(by))
        else:
            out[it.item] = "; ".join(
                f"{c} ×{len(rs)} (replicate{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))})"
                for c, rs in by.items()
            )
    return out


def _import_terms(results: JudgeResults) -> list[str]:
    """An imported file's terms: its two orders, flipped pairs where pairs were judged in both,
    and the tool's invalid verdicts; none of the wrappers' or the rubric's."""
    out = ["order 1 / order 2"]
    if results.primary:
        out.append("disagreement")
    if results.order_swap is not None and results.order_swap.counts.n:
        out.append("flipped pair")
    if results.validity.invalid:
        out.append("imported invalid verdict")
    return out


def _terms(results: JudgeResults) -> list[str]:
    if results.tool_format:
        return _import_terms(results)
    out = ["P0 / PA / PB / PAB", "invalid output"]
    if results.primary:
        out.insert(1, "disagreement")
    if any(c.swap for c in results.design.conditions):
        out.append("SWAP")
    if results.repeat is not None:
        out.append("repeat baseline")
    if results.patterns.evaluable:
        out.append("attraction / aversion")
    if results.classification.evaluable:
        out.append("prompt classes")
    if results.readout:
        out.append("log-prob readout")
    return out


def render_report(inputs: ReportInputs[JudgeResults]) -> str:
    """The report page as a string (the pipeline writes it, atomically)."""
    results, plan, audit, rows = inputs.results, inputs.plan, inputs.audit, inputs.rows
    conds = list(results.conditions_analysed)
    values = {cid: results.conditions[cid].confidence.values for cid in conds if cid in results.conditions}
    conf_svg = confidence_svg(values)
    alpha = results.alpha
    dis_svg = disagreement_svg(results.disagreement, alpha)
    swap = results.order_swap
    swap_rows = order_swap_table(swap) if swap is not None else []
    figure_rows = [r for r in swap_rows if r.group != "model pair"]
    swap_svg = order_swap_svg(figure_rows, alpha) if swap is not None else ""
    shown, total = samples(rows, plan, results)
    isolation = results.design.isolation
    note = "Each prompt under each condition: the judge prompt exactly as rendered and every verdict the judge wrote."
    if isolation == "shared":
        note += " Not a fresh context per judgment: each was made in one conversation with the earlier turns (not shown)."
    elif isolation != "fresh":
        note += " Whether each judgment had a fresh context is not recorded."
    judge = results.design.judge.name if results.design.judge else None
    tool = results.tool_format
    title = (
        f"Judge position bias: {results.n_prompts} pairs imported from {tool}"
        if tool
        else f"Judge presentation sensitivity: {results.n_prompts} prompts, "
        f"conditions {', '.join(conds) or 'none'}"
    )
    page = page_of(
        results,
        plan,
        study="judge",
        title=title + (f" ({judge})" if judge else ""),
        question=IMPORT_QUESTION if tool else QUESTION,
        verdict=verdict(results),
        alerts=alerts(results),
        terms=_terms(results),
        samples=Samples(shown, total, note),
        provenance=_provenance(results, plan, audit),
    )
    return render(
        __package__,
        TEMPLATE,
        page,
        results=results,
        conds=conds,
        primary=list(results.primary),
        repeat=results.repeat,
        cls=results.classification,
        pat=results.patterns,
        readout=results.readout,
        wins=results.model_wins,
        validity=results.validity,
        questions=questions(plan),
        classes=_classes(results),
        confidence_svg=Markup(conf_svg) if conf_svg else None,
        disagreement_svg=Markup(dis_svg) if dis_svg else None,
        order_swap=swap,
        length=results.length,
        order_swap_rows=swap_rows,
        order_swap_svg=Markup(swap_svg) if swap_svg else None,
        level=f"{100 * (1 - alpha):g}",
        tool=tool,
        n_valid=results.validity.valid,
    )
