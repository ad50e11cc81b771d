"""What another tool's log gets wrong, as a study records it: the ``log_audit`` rows a study's
measure stage writes beside the rows it reads from a log (one per log file), and the
``log_audit`` results section and metrics analysis makes of them (pure). Shared by every study
that imports logs (draws, choir); docs/interop.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.interop.records import Found, LogSequence, LogSource
from lmaudit.interop.sections import LogAudit
from lmaudit.provenance.digest import file_sha256, json_digest
from lmaudit.text import metric_safe

__all__ = [
    "AUDIT_KIND",
    "audit_row",
    "check_audit_row",
    "log_audit_line",
    "log_audit_metrics",
    "log_audit_section",
    "log_audit_tags",
    "plan_inputs",
    "read_logs",
]

AUDIT_KIND = "log_audit"


def name_in(found: Found, file: Path) -> str:
    """A file as results name it: relative to the import folder, else its file name."""
    if found.path.is_dir():
        return file.relative_to(found.path).as_posix()
    return file.name


def plan_inputs(found: Found) -> dict[str, Any]:
    """The plan's ``inputs.import`` for a log: its format and the digest of every file read."""
    files = [{"path": name_in(found, f), "sha256": file_sha256(f)} for f in found.files]
    return {"path": str(found.path), "format": found.format, "sha256": json_digest(files), "files": files}


def read_logs(found: Found) -> list[tuple[LogSource, list[LogSequence]]]:
    """Every log file of ``found`` read by its tool's reader: its source (with the audit) and sequences."""
    if found.format == "inspect":
        from lmaudit.interop.inspect_logs import read_log

        return [read_log(f, name_in(found, f)) for f in found.files]
    from lmaudit.interop.lm_eval_samples import read_samples

    return [read_samples(f, name_in(found, f)) for f in found.files if f.name.startswith("samples_")]


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


def log_audit_section(rows: Iterable[Mapping[str, Any]], source: str = "<log_audit rows>") -> LogAudit:
    """The ``log_audit`` results section of the ``log_audit`` rows (pure); rows that do not
    make one are refused in one line naming ``source`` and the field."""
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
    section = {
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
    return LogAudit.from_json(section, source)


def log_audit_metrics(section: LogAudit) -> dict[str, float]:
    """MLflow metrics of the section: totals per issue, and counts of files and named families."""
    out = {f"log_audit.{metric_safe(code)}": float(n) for code, n in section.totals.items()}
    out["log_audit.n_files"] = float(len(section.files))
    out["log_audit.n_excluded"] = float(section.n_excluded)
    out["log_audit.n_issues"] = float(len(section.issues))
    out["log_audit.n_greedy_families"] = float(len(section.greedy_families))
    out["log_audit.n_unidentified_families"] = float(len(section.unidentified_families))
    return out


def audit_row(src: LogSource, counts: Mapping[str, int], **extra: Any) -> dict[str, Any]:
    """The ``log_audit`` row of one log file: its source, settings, issues and what was kept."""
    return {
        "kind": AUDIT_KIND,
        "format": src.format,
        "family": src.family,
        "source": src.source,
        "files": src.files,
        "facts": src.facts,
        "issues": src.issues,
        **extra,
        "counts": dict(counts),
    }


def log_audit_tags(section: LogAudit) -> dict[str, str]:
    """MLflow tags of the section: the issue totals and the greedy families."""
    return {
        "log_audit.issues": ",".join(f"{k}={v}" for k, v in section.totals.items())[:500] or "none",
        "log_audit.greedy_families": ",".join(section.greedy_families)[:500] or "none",
    }


def log_audit_line(section: LogAudit) -> str:
    """The section in a run's one-line summary."""
    issues = ", ".join(f"{k} {v}" for k, v in section.totals.items())
    return f"log audit ({section.format}): {issues or 'no issues'}"
