"""Draws from other tools' logs (inspect_ai, lm-eval; docs/interop.md): the logs as measurement
rows, and the ``log_audit`` section of the results.

``measure`` turns a log into rows: one ``sequence`` row per sample (inspect) or doc (lm-eval),
its answers normalised by ``study.normalise`` (the raw completions kept beside them, draws that
are not independent left out and listed in ``meta.excluded``), and one ``log_audit`` row per
log file with what the log gets wrong. ``analyze`` reads both kinds back; the section is a pure
function of the ``log_audit`` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from lmaudit.interop.detect import Found, LogSequence, LogSource
from lmaudit.provenance.digest import file_sha256, json_digest
from lmaudit.provenance.io import InputError
from lmaudit.studies.draws.results import metric_key

__all__ = ["check_audit_row", "foreign_rows", "log_audit_metrics", "log_audit_section", "plan_inputs"]

AUDIT_KIND = "log_audit"


def _name(found: Found, file: Path) -> str:
    """A file as results name it: relative to the import folder, else its file name."""
    if found.path.is_dir():
        return file.relative_to(found.path).as_posix()
    return file.name


def plan_inputs(found: Found) -> dict[str, Any]:
    """The plan's ``inputs.import`` for a log: its format and the digest of every file read."""
    files = [{"path": _name(found, f), "sha256": file_sha256(f)} for f in found.files]
    return {"path": str(found.path), "format": found.format, "sha256": json_digest(files), "files": files}


def _read(found: Found) -> list[tuple[LogSource, list[LogSequence]]]:
    if found.format == "inspect":
        from lmaudit.interop.inspect_logs import read_log

        return [read_log(f, _name(found, f)) for f in found.files]
    from lmaudit.interop.lm_eval_samples import read_samples

    return [read_samples(f, _name(found, f)) for f in found.files if f.name.startswith("samples_")]


def _sequence_row(seq: LogSequence, norm: Callable[[str], str]) -> dict[str, Any] | None:
    kept = [d for d in seq.draws if d.excluded is None]
    if not kept:
        return None
    excluded = [{"position": d.position, "why": d.excluded, "raw": d.text} for d in seq.draws if d.excluded]
    meta = {
        **seq.meta,
        "positions": [d.position for d in kept],
        **({"excluded": excluded} if excluded else {}),
    }
    return {
        "kind": "sequence",
        "family": seq.family,
        "source": seq.source,
        "condition": seq.condition,
        "probe": seq.probe,
        "draws": [norm(d.text) for d in kept],
        "raw": [d.text for d in kept],
        "meta": meta,
    }


def foreign_rows(found: Found, norm: Callable[[str], str], rule: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every row of a log (or folder of logs): per file, its ``log_audit`` row, then its sequences.
    The whole input is read and checked before a row is returned."""
    rows: list[dict[str, Any]] = []
    for src, seqs in _read(found):
        seq_rows = [_sequence_row(s, norm) for s in seqs]
        kept = [r for r in seq_rows if r is not None]
        rows.append(
            {
                "kind": AUDIT_KIND,
                "format": src.format,
                "family": src.family,
                "source": src.source,
                "files": src.files,
                "facts": src.facts,
                "issues": src.issues,
                "normalise": dict(rule),
                "counts": {
                    "sequences_read": len(seqs),
                    "sequences": len(kept),
                    "sequences_emptied": len(seqs) - len(kept),
                    "draws_read": sum(len(s.draws) for s in seqs),
                    "draws": sum(len(r["draws"]) for r in kept),
                },
            }
        )
        rows += kept
    return rows


def check_audit_row(row: dict[str, Any], where: str) -> dict[str, Any]:
    """The row, or InputError naming the first field a ``log_audit`` row lacks or has wrong."""
    for key, kind in (("format", str), ("family", str), ("source", str), ("files", list), ("issues", dict)):
        if not isinstance(row.get(key), kind):
            raise InputError(f"{where}: field {key!r} of a log_audit row must be a {kind.__name__}")
    for code, issue in row["issues"].items():
        if not isinstance(issue, dict) or not isinstance(issue.get("count"), int) or "action" not in issue:
            raise InputError(f"{where}: field 'issues.{code}' needs an integer 'count' and an 'action'")
    return row


def _temperature(t: Any) -> str:
    return "default" if t is None else f"{float(t):g}"


def log_audit_section(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``log_audit`` results section of the ``log_audit`` rows (pure)."""
    files = sorted(rows, key=lambda r: (str(r["family"]), str(r["source"]), list(r["files"])))
    issues: list[dict[str, Any]] = []
    families: dict[str, dict[str, Any]] = {}
    totals: dict[str, int] = {}
    for r in files:
        fam = families.setdefault(
            str(r["family"]), {"sources": [], "temperature": [], "greedy": False, "issues": {}}
        )
        if r["source"] not in fam["sources"]:
            fam["sources"].append(r["source"])
        for t in (r.get("facts") or {}).get("temperature") or []:
            if _temperature(t) not in fam["temperature"]:
                fam["temperature"].append(_temperature(t))
        fam["greedy"] = fam["greedy"] or bool((r.get("facts") or {}).get("greedy"))
        for code, issue in sorted((r.get("issues") or {}).items()):
            issues.append(
                {"family": r["family"], "source": r["source"], "files": r["files"], "issue": code, **issue}
            )
            fam["issues"][code] = fam["issues"].get(code, 0) + int(issue["count"])
            totals[code] = totals.get(code, 0) + int(issue["count"])
    for fam in families.values():
        fam["temperature"].sort()
    excluded = sum(int(i["count"]) for i in issues if i["action"] == "excluded")
    return {
        "format": ",".join(sorted({str(r["format"]) for r in files})),
        "normalise": files[0].get("normalise") if files else None,
        "files": [
            {
                "files": r["files"],
                "family": r["family"],
                "source": r["source"],
                "facts": r.get("facts") or {},
                "counts": r.get("counts") or {},
                "issues": sorted(r.get("issues") or {}),
            }
            for r in files
        ],
        "families": dict(sorted(families.items())),
        "issues": issues,
        "totals": dict(sorted(totals.items())),
        "n_excluded": excluded,
        "greedy_families": sorted(n for n, f in families.items() if f["greedy"]),
        "unidentified_families": sorted(
            n for n, f in families.items() if "unidentified_model" in f["issues"]
        ),
    }


def log_audit_metrics(section: Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of the section: totals per issue, and counts of files and named families."""
    out = {f"log_audit.{metric_key(code)}": float(n) for code, n in section["totals"].items()}
    out["log_audit.n_files"] = float(len(section["files"]))
    out["log_audit.n_excluded"] = float(section["n_excluded"])
    out["log_audit.n_issues"] = float(len(section["issues"]))
    out["log_audit.n_greedy_families"] = float(len(section["greedy_families"]))
    out["log_audit.n_unidentified_families"] = float(len(section["unidentified_families"]))
    return out
