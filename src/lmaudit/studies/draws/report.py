"""The draws study's report: one self-contained ``report.html`` (inline CSS and SVG, no scripts).

:func:`render_report` takes the results dict, the plan (or ``None`` when a measurement file was
re-analysed without one) and the audit record, and returns the page (the pipeline writes it). Text is
escaped by Jinja2's autoescape; the figures are matplotlib's SVG (:mod:`.figures`), which
escapes its text.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from lmaudit import __version__
from lmaudit.reporting import config_json, fmt, utc_now
from lmaudit.reporting import get as _get
from lmaudit.reporting import num as _num
from lmaudit.reporting import pval as _pval
from lmaudit.reporting import text as _text
from lmaudit.studies.draws.figures import null_svg, rho_curve_svg

__all__ = ["render_report"]

TEMPLATE = "report_template.html.j2"
NOT_RECORDED = "not recorded"
OUTCOME_CSS = {"held": "held", "not held": "nothold", "not evaluable": "noteval"}


def _fmt(x: Any, spec: str = ".3f") -> str:
    return fmt(x, spec)


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    env.filters.update(num=_fmt, pval=_pval, text=_text)
    env.filters["int"] = lambda x: _fmt(x, ".0f")
    env.filters["pct"] = lambda x: "—" if _num(x) is None else f"{100 * float(x):.1f}%"
    env.globals.update(OUTCOME_CSS=OUTCOME_CSS, NOT_RECORDED=NOT_RECORDED)
    return env


def _template() -> jinja2.Template:
    source = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    return _environment().from_string(source)


def _families(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    alpha = float(_get(results, "params", "alpha") or 0.05)
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


def render_report(
    *, results: Mapping[str, Any], plan: Mapping[str, Any] | None, audit: Mapping[str, Any] | None
) -> str:
    audit = audit or {}
    run = {
        "Study": results.get("study"),
        "Mode": results.get("mode"),
        "Model": _get(plan, "config", "model", "name")
        if results.get("mode") != "import"
        else "not used (imported draws)",
        "Backend identity digest": _get(audit, "measure", "backend_digest"),
        "Import file": _get(plan, "inputs", "import", "path"),
        "Import SHA-256": _get(plan, "inputs", "import", "sha256"),
        "Probes SHA-256": _get(plan, "inputs", "probes", "sha256"),
        "Plan digest": _get(plan, "plan_digest") or audit.get("plan_digest"),
        "Measurements SHA-256": _get(results, "source", "measurements_sha256"),
        "Normalisation": results.get("normalise"),
        # the run is logged to MLflow after the report is written: its name, not its id
        "MLflow run": _get(audit, "mlflow", "run_name"),
        "MLflow experiment": _get(audit, "mlflow", "experiment"),
        "lmaudit version": audit.get("lmaudit_version") or __version__,
        "Planned (UTC)": _get(audit, "plan", "written_utc"),
        "Measured (UTC)": _get(audit, "measure", "finished_utc"),
        "Analysed (UTC)": _get(audit, "analyze", "finished_utc"),
    }
    families = _families(results)
    power_rhos = sorted({r for fam in families for r, _ in fam["power"]})
    return _template().render(
        title=f"lmaudit draws: {results.get('n_families', 0)} families",
        results=results,
        run=run,
        families=families,
        power_rhos=power_rhos,
        params=results.get("params") or {},
        data=results.get("data") or {},
        predictions=results.get("predictions") or [],
        sources=results.get("sources") or [],
        holm=results.get("holm") or {},
        config=config_json(plan),
        generated=utc_now(),
    )
