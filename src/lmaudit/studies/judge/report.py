"""The judge study's report: one self-contained ``report.html`` (inline CSS and SVG, no scripts):
the per-prompt condition grid, the disagreement table with exact intervals, the condition
summaries, the confidence distributions, the log-prob readout, model wins after unblinding,
invalid-output counts, deviations and provenance. Text is escaped by Jinja2's autoescape; the
confidence figure is matplotlib's SVG (:mod:`.figures`), which escapes its text."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from lmaudit import __version__
from lmaudit.reporting import claim, config_json, fmt, observed, utc_now
from lmaudit.reporting import get as _get
from lmaudit.reporting import num as _num
from lmaudit.reporting import pval as _pval
from lmaudit.reporting import text as _text
from lmaudit.studies.judge.figures import confidence_svg

__all__ = ["render_report"]

TEMPLATE = "report_template.html.j2"


def _fmt(x: Any, spec: str = ".4f") -> str:
    return fmt(x, spec)


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    env.filters.update(claim=claim, observed=observed, num=_fmt, pval=_pval, text=_text)
    env.filters["pct"] = lambda x: "—" if _num(x) is None else f"{100 * float(x):.1f}%"
    env.filters["p3"] = lambda x: _fmt(x, ".3f")
    return env


def _template() -> jinja2.Template:
    source = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    return _environment().from_string(source)


def render_report(
    *, results: Mapping[str, Any], plan: Mapping[str, Any] | None, audit: Mapping[str, Any] | None
) -> str:
    audit = audit or {}
    design = results.get("design") or {}
    run = {
        "Mode": results.get("mode"),
        "Judge": _get(design, "judge", "name") or _get(design, "execution", "judge"),
        "Judge identity digest": _get(design, "judge", "identity_digest")
        or _get(audit, "measure", "backend_digest"),
        "Isolation": design.get("isolation"),
        "Judgments per prompt and condition (k)": results.get("k"),
        "Seed (judgment seeds derive from it)": design.get("seed"),
        "Sampling": {
            k: design.get(k) for k in ("temperature", "top_p", "max_tokens", "max_attempts") if k in design
        }
        or None,
        "Rubric SHA-256": design.get("rubric_sha256"),
        "Log-prob readout": design.get("readout"),
        "Import folder": design.get("import_dir"),
        "Execution record": design.get("execution"),
        "Plan digest": _get(plan, "plan_digest") or audit.get("plan_digest"),
        "Measurements SHA-256": _get(results, "source", "measurements_sha256"),
        # the run is logged to MLflow after the report is written: its name, not its id
        "MLflow run": _get(audit, "mlflow", "run_name"),
        "MLflow experiment": _get(audit, "mlflow", "experiment"),
        "lmaudit version": audit.get("lmaudit_version") or __version__,
        "Measured (UTC)": _get(audit, "measure", "finished_utc"),
        "Analysed (UTC)": _get(audit, "analyze", "finished_utc"),
    }
    conds = list(results.get("conditions_analysed") or [])
    summaries = results.get("conditions") or {}
    values = {cid: summaries[cid]["confidence"]["values"] for cid in conds if cid in summaries}
    svg = confidence_svg(values)
    inputs = _get(plan, "inputs") or {}
    return _template().render(
        title=f"lmaudit judge: {results.get('n_prompts', 0)} prompts, conditions {', '.join(conds)}",
        results=results,
        run=run,
        conds=conds,
        cls=results.get("classification") or {},
        readout=results.get("readout") or {},
        wins=results.get("model_wins") or {},
        validity=results.get("validity") or {},
        deviations=results.get("deviations") or [],
        predictions=results.get("predictions") or [],
        inputs=inputs,
        confidence_svg=Markup(svg) if svg else None,
        config=config_json(plan),
        generated=utc_now(),
    )
