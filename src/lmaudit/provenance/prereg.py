"""Pre-registration: freeze the plan and its predictions before any model is asked anything,
refuse to run a plan that differs from the frozen one, and score every prediction afterwards.

A frozen registration (``prereg/<study>/<name>.json``) holds the plan digest, the resolved
config, every input file's digest, the decision rules, the registered predictions, a UTC
timestamp and ``file_digest``: the digest of all of that, so an edited frozen file is caught.

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
for every value in the interval (a bound reported as "> 0.50" fails "< 0.10").

A registration normally binds its data (every input file's digest is part of the plan). One
made before the data exist (``data: open``: predictions about a file that will be imported)
binds everything else; the study names which config keys and inputs are data
(``DATA_KEYS``), and the digests of the data actually scored are recorded with the scores.
"""

from __future__ import annotations

import copy
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


def _interval_outcome(op: str, lo: float | None, hi: float | None, v: float) -> str:
    """A check on a censored value known only to lie in [lo, hi] (None: unbounded)."""
    if op in ("<", "<="):
        if hi is not None and OPS[op](hi, v):
            return HELD
        return NOT_HELD if lo is not None and not OPS[op](lo, v) else NOT_EVALUABLE
    if lo is not None and OPS[op](lo, v):
        return HELD
    return NOT_HELD if hi is not None and not OPS[op](hi, v) else NOT_EVALUABLE


def score_check(c: Check, results: Mapping[str, Any]) -> dict[str, Any]:
    """One check: ``{observed, outcome, reason}``."""
    found, observed = resolve(results, c.metric)
    if not found:
        return {"observed": None, "outcome": NOT_EVALUABLE, "reason": "metric not in results"}
    if observed is None and c.op in (">", ">=", "<", "<=") and _number(c.value) is not None:
        has_iv, iv = resolve(results, c.metric + "_interval")
        if has_iv and isinstance(iv, list) and len(iv) == 2:
            outcome = _interval_outcome(c.op, _number(iv[0]), _number(iv[1]), float(c.value))
            label = resolve(results, c.metric + "_label")[1]
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
    data_keys: tuple[str, ...] = (),
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "study": study,
        "name": name,
        "frozen_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lmaudit_version": lmaudit_version,
        "plan_digest": plan["plan_digest"],
        "config": plan["config"],
        "inputs": plan["inputs"],
        "decision_rules": decision_rules,
        "predictions": [p.to_dict() for p in predictions],
    }
    if data_keys:  # an open registration (absent otherwise, so older frozen files still verify)
        body["data"] = "open"
        body["data_keys"] = list(data_keys)
    return {**body, "file_digest": json_digest(body)}


def _drop(node: Any, parts: list[str]) -> None:
    if not isinstance(node, dict) or not parts:
        return
    if len(parts) == 1:
        node.pop(parts[0], None)
    else:
        _drop(node.get(parts[0]), parts[1:])


def without_data(plan: Mapping[str, Any], data_keys: tuple[str, ...]) -> dict[str, Any]:
    """The plan minus its data (dotted paths such as ``config.study.import_path`` and
    ``inputs.import``), with the digest recomputed over what is left; the plan itself when
    ``data_keys`` is empty. An open registration binds this, so any data file can be scored."""
    if not data_keys:
        return dict(plan)
    out = copy.deepcopy(dict(plan))
    for key in data_keys:
        _drop(out, key.split("."))
    body = {k: v for k, v in out.items() if k not in ("plan_digest", "n_requests")}
    out["plan_digest"] = json_digest(body)
    return out


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
    if doc["predictions"] != [p.to_dict() for p in predictions]:
        problems.append("the predictions in config differ from the frozen ones")
    if problems:
        raise PreregError(
            f"{path}: refusing to run: "
            + "; ".join(problems)
            + ". Restore the frozen plan, or freeze a new registration under a new name."
        )
