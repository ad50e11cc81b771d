"""The QQ study's report: one self-contained ``report.html`` (inline CSS and SVG, no scripts).

:func:`render_report` takes the results dict (``QQResult.to_json()`` plus ``gates`` and
``source``), the plan (or ``None`` when a measurement file was re-analysed without one) and
the audit record, and returns the page (the pipeline writes it). Every optional part of the inputs may be
missing; it then reads "not recorded". All text is escaped by Jinja2's autoescape; the
figures are SVG written by matplotlib, which escapes its own text.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
from collections.abc import Mapping
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from lmaudit import __version__
from lmaudit.reporting import claim, observed
from lmaudit.studies.qq.figures import (
    iter_positions,
    label_effect_points,
    label_effect_svg,
    mapping_pair,
    saturation_cdf_svg,
)

__all__ = ["NOT_RECORDED", "render_report"]

NOT_RECORDED = "not recorded"
TEMPLATE = "report_template.html.j2"
ANNOTATE_ABOVE = 0.3  # Figure 2 labels items whose q moves by more than this between mappings
VERDICT_CSS = {"SATISFIED": "sat", "VIOLATED": "viol", "INDETERMINATE": "indet"}
STATUS_CSS = {"PASS": "pass", "FAIL": "fail", "NOT_RUN": "notrun"}
JOINT_CELLS = ("yy", "yn", "ny", "nn")

# Rows of the discriminant table (seed Table 1; wording in the template), in display order.
DISCRIMINANT_ROWS = ("satisfied", "polarity", "position", "noncontextual", "contextual")


# ---------------------------------------------------------------- small helpers


def _get(d: Any, *keys: str, default: Any = None) -> Any:
    """``d[k1][k2]...`` through dicts, ``default`` as soon as a level is missing or not a dict."""
    for k in keys:
        if not isinstance(d, Mapping) or k not in d or d[k] is None:
            return default
        d = d[k]
    return d


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def _fmt(x: Any, spec: str = ".3f", missing: str = "—") -> str:
    f = _num(x)
    return missing if f is None else format(f, spec)


def _signed(x: Any, nd: int = 3) -> str:
    return _fmt(x, f"+.{nd}f")


def _interval(x: Any, nd: int = 3) -> str:
    if isinstance(x, list | tuple) and len(x) == 2:
        return f"[{_signed(x[0], nd)}, {_signed(x[1], nd)}]"
    return "—"


def _text(x: Any) -> str:
    """A value as display text: ``None`` is "not recorded", containers become compact JSON."""
    if x is None or x == "":
        return NOT_RECORDED
    if isinstance(x, Mapping | list | tuple):
        return json.dumps(x, sort_keys=True, ensure_ascii=False, default=str)
    return str(x)


def _pretty(x: Any) -> str | None:
    """Readable YAML (JSON if PyYAML is unavailable) of a config-like value; ``None`` if absent."""
    if x is None:
        return None
    try:
        import yaml

        return str(yaml.safe_dump(x, sort_keys=False, allow_unicode=True, default_flow_style=False))
    except Exception:
        return json.dumps(x, indent=2, sort_keys=False, ensure_ascii=False, default=str)


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    env.filters.update(
        claim=claim, observed=observed, num=_fmt, signed=_signed, interval=_interval, text=_text
    )
    env.filters["sci"] = lambda x: _fmt(x, ".3g")
    env.filters["pct"] = lambda x: _fmt(None if _num(x) is None else 100 * float(x), ".1f") + "%"
    env.globals.update(VERDICT_CSS=VERDICT_CSS, STATUS_CSS=STATUS_CSS, NOT_RECORDED=NOT_RECORDED)
    return env


def _template() -> jinja2.Template:
    source = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    return _environment().from_string(source)


# ---------------------------------------------------------------- sections


def _pick(src: Mapping[str, Any], *paths: str) -> Any:
    """The first non-empty value among dotted paths into ``src``, e.g. ``"audit.plan.python"``."""
    for path in paths:
        v = _get(src, *path.split("."))
        if v not in ("", {}, []) and v is not None:
            return v
    return None


def _g2(
    results: Mapping[str, Any], gate: Mapping[str, Any], plan: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Gate G2 (falling back to ``results["mass"]``) and how much mass lies off the labels."""
    mass: Mapping[str, Any] = results.get("mass") or {}
    g2 = {
        "max_other": mass.get("max_other"),
        "threshold": mass.get("g2_max_other"),
        "max_envelope_width": mass.get("max_envelope_width"),
        **gate,
    }
    if "status" not in g2 and "g2_pass" in mass:
        g2["status"] = "PASS" if mass["g2_pass"] else "FAIL"
    others = sorted(o for _, p in iter_positions(results) if (o := _num(p.get("other"))) is not None)
    median = others[len(others) // 2] if others else None
    mx = _num(g2.get("max_other"))
    if median is not None and median > 0.5:
        case = "mostly_other"  # e.g. a base model: most mass is not on the labels at most positions
    elif mx is not None and mx > 0.5:
        case = "some_other"
    elif g2.get("status") == "FAIL":
        case = "fail"
    else:
        case = "labels" if mx is not None else "unknown"
    return {
        **g2,
        "median_other": median,
        "case": case,
        "share_mostly_other": sum(o > 0.5 for o in others) / len(others) if others else None,
        "base_model": bool(_get(plan, "config", "model", "base_model", default=False)),
    }


def _at(a: Any, r: int, k: int) -> Any:
    try:
        return a[r][k]
    except (TypeError, IndexError, KeyError):
        return None


def _g3(gate: Mapping[str, Any]) -> dict[str, Any]:
    """Gate G3 with each check's four joint cells unpacked (log-prob value, CP interval, inside)."""
    checks = []
    for c in gate.get("checks") or []:
        arrays = [c.get(k) for k in ("logprob_joint", "low", "high", "inside")]
        cells = [
            dict(zip(("lp", "lo", "hi", "inside"), (_at(a, *divmod(i, 2)) for a in arrays), strict=True))
            for i in range(len(JOINT_CELLS))
        ]
        att = c.get("attempts")  # draws per position (dict) as the study records them, or a total
        per_position = att if isinstance(att, Mapping) else {}
        draws = sum(v for v in per_position.values() if _num(v) is not None) if per_position else att
        detail = ", ".join(f"{k} {v}" for k, v in sorted(per_position.items()))
        checks.append({**c, "cells": cells, "draws": draws, "draws_detail": detail})
    return {**gate, "checks": checks}


def _gates(results: Mapping[str, Any], plan: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    gates: Mapping[str, Any] = results.get("gates") or {}
    return {
        "G1": dict(gates.get("G1") or {}),
        "G2": _g2(results, gates.get("G2") or {}, plan),
        "G3": _g3(gates.get("G3") or {}),
    }


def _discriminant(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per stratum: which rows of the discriminant table the observed pattern falls under."""
    items = [it for it in results.get("items") or [] if isinstance(it, Mapping)]
    fits = results.get("fits") or []
    out = []
    for stratum in sorted({str(it.get("stratum")) for it in items}):
        rs = [it for it in items if str(it.get("stratum")) == stratum]
        n = len(rs)
        verdicts = [it.get("verdict") for it in rs]
        gclass = [it.get("gamma_class") for it in rs]
        decision = {f.get("family"): f.get("decision") for f in fits if str(f.get("stratum")) == stratum}
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
        n_sat = sum(bool(it.get("saturated")) for it in rs)
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


def _items(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Verdict-table rows: the item dict plus its row class and the Y/N saturation flag."""
    return [
        {
            **it,
            "css": VERDICT_CSS.get(str(it.get("verdict")), "unknown"),
            "sat": NOT_RECORDED if it.get("saturated") is None else ("Y" if it["saturated"] else "N"),
        }
        for it in results.get("items") or []
    ]


_DICT_KEYS = ("params", "counts", "saturation", "mass", "memorization", "gates", "source")
_LIST_KEYS = ("items", "fits", "sampled")


def _clean(results: Mapping[str, Any]) -> dict[str, Any]:
    """Top-level sections of the wrong type are treated as missing (rendered "not recorded")."""
    out = {k: v for k, v in results.items() if k not in _DICT_KEYS + _LIST_KEYS}
    out.update({k: results[k] for k in _DICT_KEYS if isinstance(results.get(k), Mapping)})
    for k in _LIST_KEYS:
        if isinstance(results.get(k), list):
            out[k] = [x for x in results[k] if isinstance(x, Mapping)]
    gates = out.get("gates") or {}
    out["gates"] = {g: v for g, v in gates.items() if isinstance(v, Mapping)}
    return out


def _context(
    raw: Mapping[str, Any], plan: Mapping[str, Any] | None, audit: Mapping[str, Any], generated: str
) -> dict[str, Any]:
    results = _clean(raw)
    fig1 = saturation_cdf_svg(results)
    fig2 = label_effect_svg(results, ANNOTATE_ABOVE)
    pair = mapping_pair(results)
    gates = _gates(results, plan)
    readings = _discriminant(results)
    src = {"results": results, "plan": plan, "audit": audit}
    return {
        "title": f"lmaudit {results.get('study') or 'qq'} report",
        "pick": functools.partial(_pick, src),  # dotted-path lookup used by the header and provenance
        "generated": generated,
        "version": __version__,
        "measured_mappings": sorted({m for m, _ in iter_positions(results)}),
        "n_items": results.get("n_items", len(results.get("items") or [])),
        "counts": results.get("counts") or {},
        "gates": gates,
        "gate_list": [(g, str(gates[g].get("status") or "NOT_RUN")) for g in ("G1", "G2", "G3")],
        "items": _items(results),
        # matplotlib escapes all text in its SVG output, so the markup is safe to inline
        "fig1": None if fig1 is None else Markup(fig1),
        "fig2": None if fig2 is None else Markup(fig2),
        "pair": pair,
        "label_effect": label_effect_points(results),
        "annotate_above": ANNOTATE_ABOVE,
        "saturation": results.get("saturation") or {},
        "memorization": results.get("memorization"),
        "fits": results.get("fits") or [],
        "hits": {k: [r["stratum"] for r in readings if k in r["rows"]] for k in DISCRIMINANT_ROWS},
        "readings": readings,
        "params": results.get("params") or {},
        "sampled": results.get("sampled") or [],
        "pretty": _pretty,
    }


def render_report(
    *,
    results: dict[str, Any],
    plan: dict[str, Any] | None,
    audit: dict[str, Any] | None,
    generated_utc: str | None = None,
) -> str:
    """The report page as a string (the pipeline writes it, atomically)."""
    generated = generated_utc or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _template().render(**_context(results, plan, audit or {}, generated))
