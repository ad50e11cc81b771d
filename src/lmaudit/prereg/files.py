"""The frozen registration files: build one, write it (never over a different one), load it
(refusing an edited one), and refuse a plan or predictions that differ from it.

A frozen registration (``prereg/<study>/<name>.json``) holds the plan digest, the resolved
config, every input file's digest, the decision rules, the registered predictions, a UTC
timestamp and ``file_digest``: the digest of all of that, so an edited frozen file is caught.

A registration normally binds its data (every input file's digest is part of the plan). One
made before the data exist (``data: open``: predictions about a file that will be imported)
binds everything else; the study names which config keys and inputs are data
(``Study.data_keys``), and the digests of the data actually scored are recorded with the scores.
"""

from __future__ import annotations

import copy
import datetime as _dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lmaudit.errors import PreregError
from lmaudit.prereg.predictions import Prediction
from lmaudit.provenance.digest import json_digest
from lmaudit.provenance.io import atomic_write_json, read_json


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
    registration_file: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The frozen registration: its body and ``file_digest``. ``registration_file`` (the
    registration's own file: ``path`` and ``sha256`` of its bytes) seals the file itself, so a
    key that reaches no plan (a comment, a section later refused) cannot be added unnoticed."""
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
    if registration_file is not None:  # absent in files frozen before the file was sealed
        body["registration_file"] = dict(registration_file)
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
        same_file = (old.get("registration_file") or {}).get("sha256") in (
            None,
            (doc.get("registration_file") or {}).get("sha256"),
        )
        if (
            old["plan_digest"] == doc["plan_digest"]
            and old["predictions"] == doc["predictions"]
            and same_file
        ):
            return False
        diffs = diff_keys(old, doc, ("config", "inputs", "predictions")) or (["plan"] if same_file else [])
        diffs += [] if same_file else ["the registration file"]
        raise PreregError(
            f"{path}: a different registration is already frozen under this name "
            f"(differs in: {', '.join(diffs)}). "
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
