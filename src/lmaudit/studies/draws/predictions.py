"""Scoring the registered predictions of the draws study against a results dict (pure).

A prediction is declarative data (``conf/study/draws.yaml``, ``predictions:``)::

    {id: P1, description: "...", confidence: moderate,
     all_of: [{metric: families.gpt-oss:120b.holm_p, op: ">", value: 0.05},
              {metric: families.gpt-oss:120b.rho_upper, op: "<", value: 0.10}]}

``metric`` is a dotted path into ``results.json`` (resolved as the platform's
pre-registration does: dict keys may contain dots). A prediction is *held* when every check
holds, *not held* when any fails, and *not evaluable* otherwise (a family or value absent).

Censored values: when the value is ``null`` and ``<metric>_interval`` holds ``[lo, hi]``
(``null`` = unbounded), the check is decided if it holds, or fails, for every value in the
interval. ``rho_upper`` reported as "> 0.50" (interval ``[0.5, null]``) thus fails
"< 0.10": an uninformative bound is not read as absence of persistence.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lmaudit.provenance.prereg import resolve

__all__ = ["HELD", "NOT_EVALUABLE", "NOT_HELD", "score_predictions"]

HELD, NOT_HELD, NOT_EVALUABLE = "held", "not held", "not evaluable"
OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def _interval_outcome(op: str, lo: float | None, hi: float | None, v: float) -> str:
    if op in ("<", "<="):
        if hi is not None and OPS[op](hi, v):
            return HELD
        return NOT_HELD if lo is not None and not OPS[op](lo, v) else NOT_EVALUABLE
    if lo is not None and OPS[op](lo, v):
        return HELD
    return NOT_HELD if hi is not None and not OPS[op](hi, v) else NOT_EVALUABLE


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(float(x)):
        return None
    return float(x)


def score_check(check: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    metric, op, value = str(check["metric"]), str(check["op"]), check["value"]
    out: dict[str, Any] = {"metric": metric, "op": op, "value": value, "observed": None, "reason": ""}
    v = _number(value)
    if op not in OPS or v is None:
        return {
            **out,
            "outcome": NOT_EVALUABLE,
            "reason": f"op {op!r} / value {value!r} not a numeric comparison",
        }
    found, observed = resolve(results, metric)
    if not found:
        return {**out, "outcome": NOT_EVALUABLE, "reason": "metric not in results"}
    x = _number(observed)
    if x is not None:
        return {**out, "observed": x, "outcome": HELD if OPS[op](x, v) else NOT_HELD}
    has_iv, iv = resolve(results, metric + "_interval")
    if observed is None and has_iv and isinstance(iv, list) and len(iv) == 2:
        lo, hi = _number(iv[0]), _number(iv[1])
        label = resolve(results, metric + "_label")[1]
        outcome = _interval_outcome(op, lo, hi, v)
        return {
            **out,
            "observed": label if isinstance(label, str) else iv,
            "outcome": outcome,
            "reason": "censored value" if outcome != NOT_EVALUABLE else "censored value: undecided",
        }
    return {
        **out,
        "observed": observed if not isinstance(observed, Mapping | list) else None,
        "outcome": NOT_EVALUABLE,
        "reason": "observed value is missing or not a number",
    }


def score_predictions(
    predictions: Sequence[Mapping[str, Any]], results: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Each prediction with its checks scored and its outcome (held / not held / not evaluable)."""
    scored = []
    for p in predictions:
        checks = [score_check(c, results) for c in p.get("all_of") or []]
        outcomes = {c["outcome"] for c in checks}
        if not checks:
            outcome = NOT_EVALUABLE
        elif NOT_HELD in outcomes:
            outcome = NOT_HELD
        elif outcomes == {HELD}:
            outcome = HELD
        else:
            outcome = NOT_EVALUABLE
        first = checks[0]["observed"] if len(checks) == 1 else None
        scored.append(
            {
                "id": str(p["id"]),
                "description": str(p.get("description") or ""),
                "confidence": str(p.get("confidence") or ""),
                "outcome": outcome,
                "observed": first,
                "checks": checks,
            }
        )
    return scored
