"""The judge study's report: one self-contained ``report.html`` (inline CSS and SVG, no scripts):
the per-prompt condition grid, the disagreement table with exact intervals, the condition
summaries, the confidence distributions, the log-prob readout, model wins after unblinding,
invalid-output counts, deviations and provenance. Text is escaped by Jinja2's autoescape."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from lmaudit import __version__
from lmaudit.provenance.io import atomic_write_text
from lmaudit.reporting import claim, config_json, fmt, observed, utc_now
from lmaudit.reporting import get as _get
from lmaudit.reporting import num as _num
from lmaudit.reporting import pval as _pval
from lmaudit.reporting import text as _text

__all__ = ["confidence_svg", "render_report", "write_report"]

TEMPLATE = "report_template.html.j2"
BINS = 10


def _fmt(x: Any, spec: str = ".4f") -> str:
    return fmt(x, spec)


def confidence_svg(values_by_condition: Mapping[str, Sequence[float]]) -> str:
    """Histograms of self-reported confidence, one row per condition (10 bins over [0, 1])."""
    conds = [c for c, v in values_by_condition.items() if v]
    if not conds:
        return ""
    bar_w, row_h, left, top = 26, 54, 70, 8
    width = left + BINS * bar_w + 10
    height = top + row_h * len(conds) + 22
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="confidence distributions">'
    ]
    for row, cid in enumerate(conds):
        vals = values_by_condition[cid]
        counts = [0] * BINS
        for v in vals:
            counts[min(BINS - 1, max(0, int(float(v) * BINS)))] += 1
        peak = max(counts) or 1
        y0 = top + row * row_h + row_h - 12
        parts.append(
            f'<text x="{left - 6}" y="{y0 - 14}" text-anchor="end" font-size="11">{escape(cid)}</text>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y0 - 2}" text-anchor="end" font-size="9" fill="#666">n={len(vals)}</text>'
        )
        parts.append(f'<line x1="{left}" y1="{y0}" x2="{left + BINS * bar_w}" y2="{y0}" stroke="#999"/>')
        for b, n in enumerate(counts):
            h = (row_h - 18) * n / peak
            x = left + b * bar_w
            parts.append(
                f'<rect x="{x + 2}" y="{y0 - h:.1f}" width="{bar_w - 4}" height="{h:.1f}" fill="#4a7ab5">'
                f"<title>{escape(cid)}: {n} in [{b / BINS:.1f}, {(b + 1) / BINS:.1f}{']' if b == BINS - 1 else ')'}"
                f"</title></rect>"
            )
            if n:
                parts.append(
                    f'<text x="{x + bar_w / 2}" y="{y0 - h - 2:.1f}" text-anchor="middle" font-size="8">{n}</text>'
                )
    base = top + row_h * len(conds) - 12
    for b in range(0, BINS + 1, 2):
        parts.append(
            f'<text x="{left + b * bar_w}" y="{base + 14}" text-anchor="middle" font-size="9">{b / BINS:.1f}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


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
        "MLflow run": _get(audit, "mlflow", "run_id"),
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


def write_report(
    path: str | Path,
    *,
    results: Mapping[str, Any],
    plan: Mapping[str, Any] | None,
    audit: Mapping[str, Any] | None,
) -> Path:
    return atomic_write_text(path, render_report(results=results, plan=plan, audit=audit))
