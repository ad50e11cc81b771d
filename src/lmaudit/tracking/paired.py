"""Paired comparison of two run folders of one study on the same items.

``lmaudit compare <run A> <run B>`` reads each folder's ``results.json`` and ``plan.json``,
refuses runs of different studies, runs whose designs differ beyond the model (the plan's
config without its model, its inputs and its mode; in imported runs the import stands for the
model) and runs that share no item, then pairs
them item by item: differences are B - A. This module reads the run folders and holds the
report's types; :mod:`lmaudit.tracking.paired_studies` holds each study's pairing and
:func:`~lmaudit.tracking.paired_studies.compare_runs`, which applies it. The two designs come
first, side by side (:mod:`lmaudit.tracking.design`); :func:`compare_designs` gives that table
alone, for any two run folders.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.provenance.measured_model import read_run_measured_model
from lmaudit.tracking.design import DesignTable, design_table

#: the plan config keys that name what was measured (the model, choir's ensemble): the one
#: thing two paired runs may differ in
MODEL_KEYS = ("model", "ensemble")


@dataclass(frozen=True)
class RunFolder:
    """One run folder as the comparison reads it."""

    path: Path
    study: str
    results: Mapping[str, Any]
    plan: Mapping[str, Any]

    def typed(self) -> Any:
        """The run's results as its study's typed results (read back by the study's
        ``result_type``)."""
        from lmaudit.studies.registry import get_study

        return get_study(self.study).result(self.results, str(self.path / "results.json")).results

    def model(self) -> str:
        """What the run measured: its model's name, a choir ensemble's member names, or for an
        imported run the file or folder it imported."""
        cfg = self.plan.get("config") or {}
        if self.plan.get("mode") == "import":
            study = cfg.get("study") or {}
            return f"imported {study.get('import_path') or study.get('import_dir') or '?'}"
        members = (
            (cfg.get("ensemble") or {}).get("members") if isinstance(cfg.get("ensemble"), dict) else None
        )
        if members:
            return "+".join(str(m.get("name", "?")) for m in members if isinstance(m, dict))
        try:
            return read_run_measured_model(self.path, self.plan).name or "?"
        except InputError:  # a plan that names no model
            return "?"


def _read_object(path: Path) -> Mapping[str, Any]:
    if not path.is_file():
        raise InputError(f"{path}: not found (a run folder holds results.json and plan.json)")
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj


def load_run(path: str | Path) -> RunFolder:
    """The folder's results and plan, or InputError naming the file and field."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"{folder}: not a run folder")
    results = _read_object(folder / "results.json")
    plan = _read_object(folder / "plan.json")
    study = results.get("study")
    if not isinstance(study, str) or not study:
        raise InputError(f"{folder / 'results.json'}: field 'study' missing or not a name")
    if plan.get("study") != study:
        raise InputError(
            f"{folder / 'plan.json'}: field 'study' = {plan.get('study')!r}, results.json says {study!r}"
        )
    return RunFolder(folder, study, results, plan)


def _first_difference(a: Any, b: Any, where: str) -> str | None:
    """The first key path (sorted) at which ``a`` and ``b`` differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                side = "A" if key in a else "B"
                return f"{where}.{key} is set in run {side} only"
            found = _first_difference(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return None
    if a != b:
        return f"{where} = {json.dumps(a, default=str)[:80]} in run A, {json.dumps(b, default=str)[:80]} in run B"
    return None


#: in an imported run the import is what was measured: its file and digest play the model's part
IMPORT_KEYS = ("import_path", "import_dir")


def design_difference(a: RunFolder, b: RunFolder) -> str | None:
    """Why two runs of one study differ in design beyond the model, or None: their plans'
    config (without :data:`MODEL_KEYS`), inputs (paths and digests) and mode are compared; in
    imported runs (mode ``import``) the import (``study.import_path``/``import_dir``,
    ``inputs.import``) stands for the model and is left out too."""

    def design(r: RunFolder) -> dict[str, Any]:
        cfg = {k: v for k, v in (r.plan.get("config") or {}).items() if k not in MODEL_KEYS}
        inputs = dict(r.plan.get("inputs") or {})
        if r.plan.get("mode") == "import":
            if isinstance(cfg.get("study"), dict):
                cfg["study"] = {k: v for k, v in cfg["study"].items() if k not in IMPORT_KEYS}
            inputs.pop("import", None)
        return {"config": cfg, "inputs": inputs}

    mode = _first_difference(a.plan.get("mode"), b.plan.get("mode"), "plan.mode")
    return mode or _first_difference(design(a), design(b), "plan")


@dataclass(frozen=True)
class PairedTable:
    """One printed table: its rows (dicts keyed by column) and a legend (column -> meaning)."""

    title: str
    columns: tuple[str, ...]
    rows: list[dict[str, Any]]
    legend: dict[str, str]


@dataclass(frozen=True)
class Paired:
    """A study's pairing: ``data`` (the JSON's ``paired``), its tables and summary lines."""

    data: dict[str, Any]
    tables: list[PairedTable]
    summary: list[str]


@dataclass(frozen=True)
class DesignReport:
    """Two runs' designs side by side (any two run folders)."""

    a: RunFolder
    b: RunFolder
    design: DesignTable

    def to_json(self) -> dict[str, Any]:
        return {
            "studies": {"a": self.a.study, "b": self.b.study},
            "runs": {"a": str(self.a.path), "b": str(self.b.path)},
            "models": {"a": self.a.model(), "b": self.b.model()},
            "design": self.design.to_json(),
        }

    def to_text(self) -> str:
        return "\n".join([*_run_lines(self.a, self.b), *self.design.to_text()]) + "\n"


@dataclass(frozen=True)
class PairedReport:
    """Two runs paired item by item."""

    study: str
    a: RunFolder
    b: RunFolder
    paired: Paired
    design: DesignTable

    def to_json(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "runs": {"a": str(self.a.path), "b": str(self.b.path)},
            "models": {"a": self.a.model(), "b": self.b.model()},
            "design": self.design.to_json(),
            "paired": self.paired.data,
        }

    def to_text(self) -> str:
        """The runs, their designs, each table with its legend, then the summary tests."""
        from lmaudit.terminal import printable
        from lmaudit.tracking.compare import aligned

        out = [
            f"{self.study}: paired comparison, differences are B - A",
            *_run_lines(self.a, self.b),
            *self.design.to_text(),
            "",
        ]
        for t in self.paired.tables:
            rows = [[printable(_cell(r.get(c))) for c in t.columns] for r in t.rows]
            out += [t.title, *aligned(list(t.columns), rows), "columns:"]
            out += [f"  {c}: {m}" for c, m in t.legend.items()] + [""]
        out += [f"summary: {line}" for line in self.paired.summary]
        return "\n".join(out) + "\n"


def compare_designs(path_a: str | Path, path_b: str | Path) -> DesignReport:
    """Two run folders' designs side by side (any study, any design), or InputError naming the
    folder or file that cannot be read."""
    a, b = load_run(path_a), load_run(path_b)
    return DesignReport(a, b, design_table(a.plan, b.plan))


def _run_lines(a: RunFolder, b: RunFolder) -> list[str]:
    from lmaudit.terminal import printable

    return [
        f"  A: {printable(str(a.path))} ({printable(a.study)}, model {printable(a.model())})",
        f"  B: {printable(str(b.path))} ({printable(b.study)}, model {printable(b.model())})",
    ]


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
