"""Formatting shared by the studies' HTML reports (numbers, p-values, nested look-ups)."""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lmaudit.results import Interval

NOT_RECORDED = "not recorded"


def num(x: Any) -> float | None:
    """``x`` as a finite float, or None (booleans and non-numbers are not numbers here)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def fmt(x: Any, spec: str = ".3f") -> str:
    f = num(x)
    return "—" if f is None else format(f, spec)


def interval_text(ci: Interval | None, spec: str = ".3f", missing: str = "—") -> str:
    """``[lo, hi]``, each end as :func:`fmt` writes it; ``missing`` where there is no interval."""
    return missing if ci is None else f"[{fmt(ci.lo, spec)}, {fmt(ci.hi, spec)}]"


def pval(x: Any) -> str:
    f = num(x)
    if f is None:
        return "—"
    return f"{f:.4f}" if f >= 1e-3 else f"{f:.2e}"


def text(x: Any) -> str:
    """Any recorded value as text; empty or missing values say so."""
    if x is None or x == "":
        return NOT_RECORDED
    if isinstance(x, Mapping | list | tuple):
        return json.dumps(x, sort_keys=True, ensure_ascii=False, default=str)
    return str(x)


def get(d: Any, *keys: str, default: Any = None) -> Any:
    """``d[k1][k2]...`` through mappings; ``default`` as soon as a level is missing or not a mapping."""
    for k in keys:
        if not isinstance(d, Mapping) or d.get(k) is None:
            return default
        d = d[k]
    return d


def claim(p: Mapping[str, Any]) -> str:
    """A scored prediction's claim: ``metric op value``, or its checks joined by "and"."""
    checks = p.get("all_of") or [p]
    return " and ".join(f"{c.get('metric')} {c.get('op')} {text(c.get('value'))}" for c in checks)


def observed(p: Mapping[str, Any]) -> str:
    """A scored prediction's observed value(s); a compound one lists each check's."""
    if not p.get("checks"):
        return text(p.get("observed"))
    return "; ".join(f"{c['metric']} = {text(c.get('observed'))} ({c['outcome']})" for c in p["checks"])


def config_json(plan: Mapping[str, Any] | None) -> str | None:
    """The plan's resolved config, pretty-printed for a report's provenance section."""
    return json.dumps(get(plan, "config"), indent=2, sort_keys=True, ensure_ascii=False) if plan else None


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
