"""Registered predictions: parsed from config, checked against a study's results shape,
and scored against results.

Predictions are declarative claims over result fields, never code::

    - {id: P1, metric: counts.saturated, op: ">=", value: 15, description: "saturated items"}
    - {id: P2, metric: counts.gamma_class.CONTEXTUAL, op: "==", value: 0}
    - {id: P3, metric: items.s1-01.verdict, op: "==", value: VIOLATED}
    - id: P4                      # a compound claim: every check must hold
      confidence: moderate
      all_of:
        - {metric: "families.gpt-oss:120b.holm_p", op: ">", value: 0.05}
        - {metric: "families.gpt-oss:120b.rho_upper", op: "<", value: 0.10}

``metric`` is a dotted path into ``results.json``; a list of records is indexed by its
records' ``item`` / ``id`` / ``name`` / ``family`` field (``items.s1-01.q``). A compound
prediction is held when every check holds, not held when any check fails, and not evaluable
otherwise. Censored values: when the observed value is ``null`` and ``<metric>_interval``
holds ``[lo, hi]`` (``null`` = unbounded), a numeric check is decided if it holds, or fails,
for every value in the interval (a bound reported as "> 0.50" fails "< 0.10" and "<= 0.50";
the label's "> x" / "< x" marks that end as excluded).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from lmaudit.errors import PreregError

OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
HELD, NOT_HELD, NOT_EVALUABLE = "held", "not held", "not evaluable"
_INDEX_FIELDS = ("item", "id", "name", "family", "source")


_CHECK_FIELDS = ("metric", "op", "value")


@dataclass(frozen=True)
class Check:
    metric: str
    op: str
    value: Any


@dataclass(frozen=True)
class Prediction:
    id: str
    metric: str | None = None  # a simple prediction: metric op value
    op: str | None = None
    value: Any = None
    description: str = ""
    confidence: str = ""
    all_of: tuple[Check, ...] = ()  # a compound prediction: every check must hold

    def to_dict(self) -> dict[str, Any]:
        """The registered form (what a frozen file holds; simple predictions keep the original
        five fields, so registrations frozen before compound claims existed still verify)."""
        if self.all_of:
            out: dict[str, Any] = {"id": self.id, "description": self.description}
            if self.confidence:
                out["confidence"] = self.confidence
            out["all_of"] = [asdict(c) for c in self.all_of]
            return out
        out = {
            "id": self.id,
            "metric": self.metric,
            "op": self.op,
            "value": self.value,
            "description": self.description,
        }
        if self.confidence:
            out["confidence"] = self.confidence
        return out

    @property
    def checks(self) -> tuple[Check, ...]:
        return self.all_of or (Check(str(self.metric), str(self.op), self.value),)


def _check(c: Any, where: str) -> Check:
    if not isinstance(c, Mapping):
        raise PreregError(f"{where}: must be a mapping with metric, op, value")
    unknown = sorted(set(c) - set(_CHECK_FIELDS))
    if unknown:
        raise PreregError(f"{where}: unknown field(s) {', '.join(unknown)}")
    metric = c.get("metric")
    if not isinstance(metric, str) or not metric:
        raise PreregError(f"{where}: field 'metric' must be a dotted path into results.json")
    op = c.get("op")
    if op not in OPS:
        raise PreregError(f"{where}: field 'op' = {op!r} is not one of {' '.join(OPS)}")
    if "value" not in c:
        raise PreregError(f"{where}: field 'value' is missing")
    return Check(metric=metric, op=str(op), value=c["value"])


def parse_predictions(raw: Any, source: str) -> list[Prediction]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise PreregError(f"{source}: field 'predictions' must be a list")
    out: list[Prediction] = []
    seen: set[str] = set()
    for i, p in enumerate(raw):
        where = f"{source}: prediction {i}"
        if not isinstance(p, Mapping):
            raise PreregError(f"{where}: must be a mapping with id, metric, op, value (or id, all_of)")
        pid = p.get("id")
        if not isinstance(pid, str) or not pid:
            raise PreregError(f"{where}: field 'id' must be a non-empty string")
        where = f"{source}: prediction '{pid}'"
        if pid in seen:
            raise PreregError(f"{where}: field 'id' is used twice")
        seen.add(pid)
        meta = {"id", "description", "confidence"}
        if "all_of" in p:
            unknown = sorted(set(p) - meta - {"all_of"})
            if unknown:
                raise PreregError(
                    f"{where}: unknown field(s) {', '.join(unknown)} (a compound prediction has id, "
                    "description, confidence, all_of)"
                )
            raw_checks = p["all_of"]
            if not isinstance(raw_checks, list) or not raw_checks:
                raise PreregError(f"{where}: field 'all_of' must be a non-empty list of checks")
            checks = tuple(_check(c, f"{where}: all_of[{j}]") for j, c in enumerate(raw_checks))
            out.append(
                Prediction(
                    id=pid,
                    description=str(p.get("description") or ""),
                    confidence=str(p.get("confidence") or ""),
                    all_of=checks,
                )
            )
            continue
        unknown = sorted(set(p) - meta - set(_CHECK_FIELDS))
        if unknown:
            raise PreregError(f"{where}: unknown field(s) {', '.join(unknown)}")
        c = _check({k: v for k, v in p.items() if k in _CHECK_FIELDS}, where)
        out.append(
            Prediction(
                id=pid,
                metric=c.metric,
                op=c.op,
                value=c.value,
                description=str(p.get("description") or ""),
                confidence=str(p.get("confidence") or ""),
            )
        )
    return out


def resolve(results: Any, path: str) -> tuple[bool, Any]:
    """Follow a dotted path; returns (found, value)."""
    node = results
    parts = path.split(".")
    i = 0
    while i < len(parts):
        if isinstance(node, Mapping):
            # keys may themselves contain dots (e.g. a threshold "0.99"): take the longest match
            for j in range(len(parts), i, -1):
                key = ".".join(parts[i:j])
                if key in node:
                    node, i = node[key], j
                    break
            else:
                return False, None
        elif isinstance(node, list):
            for j in range(len(parts), i, -1):
                key = ".".join(parts[i:j])
                hit = [
                    r for r in node if isinstance(r, Mapping) and any(r.get(f) == key for f in _INDEX_FIELDS)
                ]
                if len(hit) == 1:
                    node, i = hit[0], j
                    break
                if key.isdigit() and int(key) < len(node) and j == i + 1:
                    node, i = node[int(key)], j
                    break
            else:
                return False, None
        else:
            return False, None
    return True, node


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(float(x)):
        return None
    return float(x)


def _interval_outcome(
    op: str, lo: float | None, hi: float | None, v: float, lo_open: bool = False, hi_open: bool = False
) -> str:
    """A check on a censored value known only to lie between ``lo`` and ``hi`` (None: unbounded;
    ``*_open``: that end excluded, as in "> 0.50"): held if it holds for every such value, not
    held if it fails for every one, not evaluable otherwise."""
    if op in ("<", "<="):
        holds = hi is not None and (hi <= v if (hi_open or op == "<=") else hi < v)
        fails = lo is not None and (lo >= v if (lo_open or op == "<") else lo > v)
    else:
        holds = lo is not None and (lo >= v if (lo_open or op == ">=") else lo > v)
        fails = hi is not None and (hi <= v if (hi_open or op == ">") else hi < v)
    return HELD if holds else NOT_HELD if fails else NOT_EVALUABLE


def score_check(c: Check, results: Mapping[str, Any]) -> dict[str, Any]:
    """One check: ``{observed, outcome, reason}``."""
    found, observed = resolve(results, c.metric)
    if not found:
        return {"observed": None, "outcome": NOT_EVALUABLE, "reason": "metric not in results"}
    if observed is None and c.op in (">", ">=", "<", "<=") and _number(c.value) is not None:
        has_iv, iv = resolve(results, c.metric + "_interval")
        if has_iv and isinstance(iv, list) and len(iv) == 2:
            label = resolve(results, c.metric + "_label")[1]
            text = label.strip() if isinstance(label, str) else ""
            outcome = _interval_outcome(
                c.op,
                _number(iv[0]),
                _number(iv[1]),
                float(c.value),
                lo_open=text.startswith(">") and not text.startswith(">="),
                hi_open=text.startswith("<") and not text.startswith("<="),
            )
            return {
                "observed": label if isinstance(label, str) else iv,
                "outcome": outcome,
                "reason": "censored value" if outcome != NOT_EVALUABLE else "censored value: undecided",
            }
    if observed is None or (isinstance(observed, float) and not math.isfinite(observed)):
        return {
            "observed": None,
            "outcome": NOT_EVALUABLE,
            "reason": "observed value is missing or not finite",
        }
    if isinstance(observed, (Mapping, list)):
        return {
            "observed": observed,
            "outcome": NOT_EVALUABLE,
            "reason": "metric names a section, not a value",
        }
    try:
        outcome = HELD if OPS[c.op](observed, c.value) else NOT_HELD
    except TypeError:
        return {
            "observed": observed,
            "outcome": NOT_EVALUABLE,
            "reason": f"cannot compare {observed!r} {c.op} {c.value!r}",
        }
    return {"observed": observed, "outcome": outcome, "reason": ""}


def score(predictions: list[Prediction], results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each prediction held / not held / not evaluable, beside its observed value(s)."""
    out = []
    for p in predictions:
        if not p.all_of:
            out.append({**p.to_dict(), **score_check(p.checks[0], results)})
            continue
        checks = [{**asdict(c), **score_check(c, results)} for c in p.all_of]
        outcomes = {c["outcome"] for c in checks}
        if NOT_HELD in outcomes:
            outcome = NOT_HELD
        elif outcomes == {HELD}:
            outcome = HELD
        else:
            outcome = NOT_EVALUABLE
        reasons = sorted({f"{c['metric']}: {c['reason']}" for c in checks if c["outcome"] == NOT_EVALUABLE})
        out.append(
            {
                **p.to_dict(),
                "observed": checks[0]["observed"] if len(checks) == 1 else None,
                "outcome": outcome,
                "reason": "; ".join(reasons) if outcome == NOT_EVALUABLE else "",
                "checks": checks,
            }
        )
    return out


def unknown_metrics(predictions: list[Prediction], template: Mapping[str, Any]) -> list[str]:
    """Predictions whose metric paths do not exist in a results dict of the study's shape."""
    return [
        f"{p.id}: {c.metric}" for p in predictions for c in p.checks if not resolve(template, c.metric)[0]
    ]
