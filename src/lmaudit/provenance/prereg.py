"""Pre-registration: freeze the plan and its predictions before any model is asked anything,
refuse to run a plan that differs from the frozen one, and score every prediction afterwards.

A frozen registration (``prereg/<study>/<name>.json``) holds the plan digest, the resolved
config, every input file's digest, the decision rules, the registered predictions, a UTC
timestamp and ``file_digest``: the digest of all of that, so an edited frozen file is caught.

Predictions are declarative claims over result fields, never code::

    - {id: P1, metric: counts.saturated, op: ">=", value: 15, description: "saturated items"}
    - {id: P2, metric: counts.gamma_class.CONTEXTUAL, op: "==", value: 0}
    - {id: P3, metric: items.s1-01.verdict, op: "==", value: VIOLATED}

``metric`` is a dotted path into ``results.json``; a list of records is indexed by its
records' ``item`` / ``id`` / ``name`` / ``family`` field (``items.s1-01.q``).
"""

from __future__ import annotations

import datetime as _dt
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lmaudit.provenance.digest import json_digest
from lmaudit.provenance.io import InputError, atomic_write_json, read_json

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


class PreregError(InputError):
    """A registration is missing, edited, or does not match the plan being run."""


@dataclass(frozen=True)
class Prediction:
    id: str
    metric: str
    op: str
    value: Any
    description: str = ""


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
            raise PreregError(f"{where}: must be a mapping with id, metric, op, value")
        pid = p.get("id")
        if not isinstance(pid, str) or not pid:
            raise PreregError(f"{where}: field 'id' must be a non-empty string")
        where = f"{source}: prediction '{pid}'"
        if pid in seen:
            raise PreregError(f"{where}: field 'id' is used twice")
        seen.add(pid)
        unknown = sorted(set(p) - {"id", "metric", "op", "value", "description"})
        if unknown:
            raise PreregError(f"{where}: unknown field(s) {', '.join(unknown)}")
        metric = p.get("metric")
        if not isinstance(metric, str) or not metric:
            raise PreregError(f"{where}: field 'metric' must be a dotted path into results.json")
        op = p.get("op")
        if op not in OPS:
            raise PreregError(f"{where}: field 'op' = {op!r} is not one of {' '.join(OPS)}")
        if "value" not in p:
            raise PreregError(f"{where}: field 'value' is missing")
        out.append(
            Prediction(
                id=pid,
                metric=metric,
                op=str(op),
                value=p["value"],
                description=str(p.get("description") or ""),
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


def score(predictions: list[Prediction], results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each prediction held / not held / not evaluable, beside its observed value."""
    out = []
    for p in predictions:
        found, observed = resolve(results, p.metric)
        reason = ""
        if not found:
            outcome, reason = NOT_EVALUABLE, "metric not in results"
        elif observed is None or (isinstance(observed, float) and not math.isfinite(observed)):
            outcome, reason = NOT_EVALUABLE, "observed value is missing or not finite"
        elif isinstance(observed, (Mapping, list)):
            outcome, reason = NOT_EVALUABLE, "metric names a section, not a value"
        else:
            try:
                outcome = HELD if OPS[p.op](observed, p.value) else NOT_HELD
            except TypeError:
                outcome, reason = NOT_EVALUABLE, f"cannot compare {observed!r} {p.op} {p.value!r}"
        out.append(
            {**asdict(p), "observed": observed if found else None, "outcome": outcome, "reason": reason}
        )
    return out


def unknown_metrics(predictions: list[Prediction], template: Mapping[str, Any]) -> list[str]:
    """Predictions whose metric path does not exist in a results dict of the study's shape."""
    return [f"{p.id}: {p.metric}" for p in predictions if not resolve(template, p.metric)[0]]


# --- freeze / verify -------------------------------------------------------------------------


def prereg_path(root: str | Path, study: str, name: str) -> Path:
    return Path(root) / study / f"{name}.json"


def _body(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "file_digest"}


def build_registration(
    *,
    study: str,
    name: str,
    plan: Mapping[str, Any],
    decision_rules: Any,
    predictions: list[Prediction],
    lmaudit_version: str,
) -> dict[str, Any]:
    body = {
        "study": study,
        "name": name,
        "frozen_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lmaudit_version": lmaudit_version,
        "plan_digest": plan["plan_digest"],
        "config": plan["config"],
        "inputs": plan["inputs"],
        "decision_rules": decision_rules,
        "predictions": [asdict(p) for p in predictions],
    }
    return {**body, "file_digest": json_digest(body)}


def write_registration(path: Path, doc: dict[str, Any]) -> bool:
    """Write a new registration; returns False if the same plan is already frozen there.

    A registration is never overwritten with a different one."""
    if path.exists():
        old = load_registration(path)
        if old["plan_digest"] == doc["plan_digest"] and old["predictions"] == doc["predictions"]:
            return False
        raise PreregError(
            f"{path}: a different registration is already frozen under this name "
            f"(differs in: {', '.join(diff_keys(old, doc, ('config', 'inputs', 'predictions'))) or 'plan'}). "
            "Frozen registrations are never overwritten: choose a new prereg name."
        )
    atomic_write_json(path, doc)
    return True


def load_registration(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise PreregError(
            f"{path}: no frozen registration; run `python run.py prereg=<name> stage=freeze` first"
        )
    doc = read_json(path)
    if not isinstance(doc, dict) or "file_digest" not in doc:
        raise PreregError(f"{path}: not a frozen registration (no file_digest)")
    if json_digest(_body(doc)) != doc["file_digest"]:
        raise PreregError(
            f"{path}: the frozen registration was edited after freezing (its digest no longer matches)"
        )
    return doc


def diff_keys(a: Mapping[str, Any], b: Mapping[str, Any], sections: tuple[str, ...]) -> list[str]:
    def walk(x: Any, y: Any, prefix: str) -> list[str]:
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            out: list[str] = []
            for k in sorted(set(x) | set(y), key=str):
                out += walk(x.get(k), y.get(k), f"{prefix}{k}.")
            return out
        return [] if x == y else [prefix.rstrip(".")]

    return [d for s in sections for d in walk(a.get(s), b.get(s), f"{s}.")]


def verify(
    doc: Mapping[str, Any], plan: Mapping[str, Any], predictions: list[Prediction], path: Path
) -> None:
    """Refuse when the plan (config, inputs, prompts) or the predictions differ from the frozen ones."""
    problems = []
    if doc["plan_digest"] != plan["plan_digest"]:
        diffs = diff_keys(doc, plan, ("config", "inputs"))
        problems.append("the plan differs in " + (", ".join(diffs) if diffs else "its rendered prompts"))
    if doc["predictions"] != [asdict(p) for p in predictions]:
        problems.append("the predictions in config differ from the frozen ones")
    if problems:
        raise PreregError(
            f"{path}: refusing to run: "
            + "; ".join(problems)
            + ". Restore the frozen plan, or freeze a new registration under a new name."
        )
