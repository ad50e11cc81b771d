"""The QQ study's report: one self-contained ``report.html`` (inline CSS and SVG, no scripts).

The page (:mod:`lmaudit.reporting.page`) leads with the verdict (:mod:`.verdict`), then the
registered predictions, the study's sections (gates, per-item verdicts, figures, diagnostics),
each item as asked and answered (:mod:`.samples`) and provenance. :func:`render_report` takes the
typed results (:class:`~lmaudit.studies.qq.results.QQResults`), the plan (or ``None`` when a
measurement file was re-analysed without one), the audit record and the measurement rows; a part
of the plan or the audit record that is missing reads "not recorded". Text is escaped by Jinja2's
autoescape; the figures are SVG written by matplotlib, which escapes its own text.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from lmaudit.errors import InputError
from lmaudit.provenance.measured_model import read_measured_model
from lmaudit.reporting import NOT_RECORDED, fmt
from lmaudit.reporting import get as _get
from lmaudit.reporting import num as _num
from lmaudit.reporting.page import Samples, page_of, provenance, render
from lmaudit.results import Interval
from lmaudit.studies.layout import ReportInputs
from lmaudit.studies.qq.mixture.report import mixture_alerts, mixture_cdf_svg, mixture_view
from lmaudit.studies.qq.report.figures import (
    iter_positions,
    label_effect_points,
    label_effect_svg,
    mapping_pair,
    saturation_cdf_svg,
)
from lmaudit.studies.qq.report.gates import gate_views
from lmaudit.studies.qq.report.samples import samples, wordings
from lmaudit.studies.qq.report.verdict import alerts, terms, verdict
from lmaudit.studies.qq.results import ItemResult, QQResults

__all__ = ["NOT_RECORDED", "render_report"]

TEMPLATE = "template.html.j2"
QUESTION = (
    "Do the model's answers to a pair of questions asked in both orders satisfy the QQ equality, "
    "the question-order pattern the projective model predicts?"
)
ANNOTATE_ABOVE = 0.3  # Figure 2 labels items whose q moves by more than this between mappings
VERDICT_CSS = {"SATISFIED": "sat", "VIOLATED": "viol", "INDETERMINATE": "indet"}
STATUS_CSS = {"PASS": "pass", "FAIL": "fail", "NOT_RUN": "notrun"}

# Rows of the discriminant table (seed Table 1; wording in the template), in display order.
DISCRIMINANT_ROWS = ("satisfied", "polarity", "position", "noncontextual", "contextual")


def _signed(x: Any, nd: int = 3) -> str:
    return fmt(x, f"+.{nd}f")


def _interval(x: Interval, nd: int = 3) -> str:
    return f"[{_signed(x.lo, nd)}, {_signed(x.hi, nd)}]"


def _plain_ci(x: Interval | None) -> str:
    return "— (fewer than two items)" if x is None else f"[{fmt(x.lo)}, {fmt(x.hi)}]"


def _pct_ci(x: Interval | None) -> str:
    if x is not None and _num(x.lo) is not None and _num(x.hi) is not None:
        return f"[{100 * x.lo:.1f}%, {100 * x.hi:.1f}%]"
    return "—"


def _sci(x: Any) -> str:
    return fmt(x, ".3g")


# ---------------------------------------------------------------- sections


def _pick(src: Mapping[str, Any], *paths: str) -> Any:
    """The first non-empty value among dotted paths into ``src``, e.g. ``"audit.plan.python"``."""
    for path in paths:
        v = _get(src, *path.split("."))
        if v not in ("", {}, []) and v is not None:
            return v
    return None


def _discriminant(results: QQResults) -> list[dict[str, Any]]:
    """Per stratum: which rows of the discriminant table the observed pattern falls under."""
    out = []
    for stratum in sorted({it.stratum for it in results.items}):
        rs = [it for it in results.items if it.stratum == stratum]
        n = len(rs)
        verdicts = [it.verdict for it in rs]
        gclass = [it.gamma_class for it in rs]
        decision = {f.family: f.decision for f in results.fits if f.stratum == stratum}
        n_viol, n_ctx = verdicts.count("VIOLATED"), gclass.count("CONTEXTUAL")
        rows: list[str] = []
        if n_ctx:
            rows.append("contextual")
        if n_viol == 0 and verdicts.count("INDETERMINATE") == 0:
            rows.append("satisfied")
        if n_viol:
            rows += [fam for fam in ("polarity", "position") if decision.get(fam) == "compatible"]
            if all(decision.get(f) == "rejected" for f in ("polarity", "position")) and all(
                g == "NONCONTEXTUAL" for g in gclass
            ):
                rows.append("noncontextual")
        n_sat = sum(it.saturated for it in rs)
        notes = []
        if n_viol == 0 and verdicts.count("INDETERMINATE"):
            notes.append("some verdicts are INDETERMINATE: no pattern row applies to them")
        if n_viol and not rows:
            notes.append("violations with Γ not certified either way: no row applies yet")
        if 2 * n_sat > n:
            notes.append(f"{n_sat}/{n} items are saturated, so this reading is weakly informative")
        out.append(
            {
                "stratum": stratum,
                "n": n,
                "n_violated": n_viol,
                "n_contextual": n_ctx,
                "rows": [r for r in DISCRIMINANT_ROWS if r in rows],
                "notes": notes,
            }
        )
    return out


def _items(results: QQResults) -> list[tuple[ItemResult, str, str]]:
    """Verdict-table rows: each item with its row class and its Y/N saturation flag."""
    return [
        (it, VERDICT_CSS.get(it.verdict, "unknown"), "Y" if it.saturated else "N") for it in results.items
    ]


def _recorded(results: QQResults) -> dict[str, Any]:
    """What the provenance table shows of the results (``results.*`` rows)."""
    return {
        "study": results.study,
        "n_items": results.n_items,
        "params": results.params.to_json(),
        "prereg": None if results.prereg is None else results.prereg.to_json(),
        "source": None if results.source is None else results.source.to_json(),
    }


# each row: label, then dotted paths into results / plan / audit, the first one present wins
PROVENANCE_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Study", ("results.study", "plan.study")),
    ("Model", ("measured_model",)),
    ("Framing", ("plan.config.framing.name",)),
    ("Framing track", ("plan.config.framing.track",)),
    ("Label mapping", ("plan.config.mapping.name",)),
    ("Mappings measured", ("measured_mappings",)),
    ("Estimand", ("plan.config.estimand.kind", "results.params.estimand")),
    ("Items", ("results.n_items",)),
    ("Item bank", ("plan.inputs.items.path", "audit.plan.inputs.items.path", "audit.analyze.inputs.items.path")),
    ("Item bank SHA-256", ("plan.inputs.items.sha256", "audit.plan.inputs.items.sha256", "audit.analyze.inputs.items.sha256")),
    ("Registration", ("results.prereg.name",)),
    ("Registration file digest", ("results.prereg.file_digest",)),
    ("Requests planned", ("plan.n_requests", "audit.plan.n_requests")),
    ("Plan digest", ("plan.plan_digest", "audit.plan_digest")),
    ("Measurement file", ("audit.measure.measurements.path", "audit.analyze.measurements")),
    ("Measurement rows", ("audit.measure.measurements.rows",)),
    ("Measurements SHA-256", ("results.source.measurements_sha256", "audit.analyze.measurements_sha256", "audit.measure.measurements.sha256")),
    ("Results SHA-256", ("audit.analyze.results_sha256",)),
    ("Backend identity digest", ("audit.measure.backend_digest",)),
    ("Backend identity", ("audit.measure.backend_identity",)),
    ("Backend description", ("audit.measure.backend",)),
    ("Cache", ("audit.measure.cache",)),
    ("Timings (s)", ("audit.measure.seconds",)),
    ("Analysis parameters", ("results.params",)),
    ("Git commit", ("audit.plan.git_commit",)),
    ("Python", ("audit.plan.python",)),
    ("Platform", ("audit.plan.platform",)),
    # the run is logged to MLflow after the report is written: its name, not its id
    ("MLflow run", ("audit.mlflow.run_name",)),
    ("MLflow experiment", ("audit.mlflow.experiment",)),
    ("lmaudit version (run)", ("audit.lmaudit_version",)),
    ("Planned (UTC)", ("audit.plan.written_utc",)),
    ("Measured (UTC)", ("audit.measure.finished_utc",)),
    ("Analysed (UTC)", ("audit.analyze.finished_utc",)),
)  # fmt: skip


def _sorted(v: Any) -> Any:
    """Mappings with their keys sorted, at every level: the page does not depend on the order a
    record was built in (in memory) or read back in (sorted, from disk)."""
    if isinstance(v, Mapping):
        return {k: _sorted(v[k]) for k in sorted(v, key=str)}
    if isinstance(v, list | tuple):
        return [_sorted(x) for x in v]
    return v


def _model_name(plan: Mapping[str, Any] | None, audit: Mapping[str, Any]) -> str | None:
    """The measured model's name as the run records it (None: not recorded)."""
    try:
        return read_measured_model(audit, plan).name
    except InputError:
        return None


def _title(results: QQResults, model: Any) -> str:
    n = results.n_items
    return f"Question order and the QQ equality: {n} item{'' if n == 1 else 's'}" + (
        f" ({model})" if model else ""
    )


def render_report(inputs: ReportInputs[QQResults]) -> str:
    """The report page as a string (the pipeline writes it, atomically)."""
    results, plan, audit, rows = inputs.results, inputs.plan, inputs.audit, inputs.rows
    fig1 = saturation_cdf_svg(results)
    fig2 = label_effect_svg(results, ANNOTATE_ABOVE)
    gates = gate_views(results, plan)
    readings = _discriminant(results)
    mappings = sorted({m for m, _ in iter_positions(results)})
    pick = functools.partial(
        _pick,
        {
            "results": _recorded(results),
            "plan": plan,
            "audit": audit,
            "measured_mappings": mappings or None,
            "measured_model": _model_name(plan, audit),
        },
    )
    # a mixture's persona rows are its components', shown in the mixture section: the items
    # as asked are the plain estimand's
    shown, total = samples(results, plan, [r for r in rows if "persona" not in r])
    mixture = mixture_view(results)
    figm = mixture_cdf_svg(results)
    note = (
        "Each item: its two questions, the exact conversations asked (every label mapping, order and "
        "position; position 2 is asked once after each first answer) and the label probabilities the "
        "model gave at each, with the item's verdict."
        + (
            " In this mixture run the conversations and answers are the plain estimand's (no persona); "
            "the verdict is the aggregate's (see the mixture section for every component)."
            if mixture
            else ""
        )
    )
    page = page_of(
        results,
        plan,
        study="qq",
        title=_title(results, pick("plan.config.model.name")),
        question=QUESTION,
        verdict=verdict(results, gates),
        alerts=alerts(results, gates) + mixture_alerts(mixture),
        terms=terms(results),
        samples=Samples(shown, total, note),
        provenance=provenance((label, _sorted(pick(*paths))) for label, paths in PROVENANCE_ROWS),
    )
    return render(
        __package__,
        TEMPLATE,
        page,
        n_items=results.n_items,
        gates=gates,
        gate_list=[(g, str(gates[g]["status"])) for g in ("G1", "G2", "G3")],
        items=_items(results),
        wordings=wordings(plan),
        # matplotlib escapes all text in its SVG output, so the markup is safe to inline
        fig1=None if fig1 is None else Markup(fig1),
        fig2=None if fig2 is None else Markup(fig2),
        mixture=mixture,
        figm=None if figm is None else Markup(figm),
        pair=mapping_pair(results),
        label_effect=label_effect_points(results),
        annotate_above=ANNOTATE_ABOVE,
        saturation=results.saturation,
        memorization=results.memorization,
        fits=results.fits,
        hits={k: [r["stratum"] for r in readings if k in r["rows"]] for k in DISCRIMINANT_ROWS},
        readings=readings,
        params=results.params,
        sampled=results.sampled,
        summary=results.across_items,
        level=f"{100 * results.across_items.confidence:g}%",
        pct_ci=_pct_ci,
        plain_ci=_plain_ci,
        sampling_error=results.sampling_error,
        VERDICT_CSS=VERDICT_CSS,
        STATUS_CSS=STATUS_CSS,
        sci=_sci,
        signed=_signed,
        interval=_interval,
    )
