"""The run folder's protocol and result records, with their SHA-256 manifests.

Before the first judgment, :func:`write_protocol` writes ``packets/judge_<condition>.json``
(what the judge sees), ``rubric.md``, ``analysis_plan.json`` and ``manifest.json`` (their
digests, plus the candidate set's and the hidden mapping's; the mapping itself is not copied).
A run folder whose manifest belongs to the same plan is checked instead: an edited packet
refuses to be judged. After judging, :func:`write_results` writes ``results/results_<condition>.json``
(the import format, so a run's results can be re-imported), ``results/execution.json`` and
``result_manifest.json``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import InputError, atomic_write_bytes, atomic_write_json, dumps_json, read_json
from lmaudit.studies.judge.packets import packet_bytes

__all__ = ["write_protocol", "write_results"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def protocol_files(plan: Mapping[str, Any]) -> dict[str, bytes]:
    """The protocol files of a plan, by path relative to the run folder, as exact bytes."""
    files = {f"packets/judge_{cid}.json": packet_bytes(p) for cid, p in plan["packets"].items()}
    files["rubric.md"] = str(plan["rubric"]).encode("utf-8")
    files["analysis_plan.json"] = dumps_json(plan["analysis_plan"]).encode("utf-8")
    return files


def write_protocol(out: Path, plan: Mapping[str, Any]) -> dict[str, Any]:
    """Freeze the packets, rubric and analysis plan (or check an earlier freeze of this plan)."""
    files = protocol_files(plan)
    manifest_path = out / "manifest.json"
    if manifest_path.exists():
        old = read_json(manifest_path)
        if isinstance(old, dict) and old.get("plan_digest") == plan["plan_digest"]:
            for rel, digest in old.get("files", {}).items():
                p = out / rel
                if not p.exists() or file_sha256(p) != digest:
                    raise InputError(
                        f"{p}: differs from its frozen digest in {manifest_path}; the protocol was "
                        "edited after freezing (re-plan into a new run folder)"
                    )
            return dict(old)
    for rel, data in files.items():
        atomic_write_bytes(out / rel, data)
    manifest = {
        "status": "pre-judgment: packets, rubric and analysis plan frozen before any judgment",
        "plan_digest": plan["plan_digest"],
        "files": {rel: _sha(data) for rel, data in files.items()},
        "candidates": plan["inputs"]["candidates"],
        "mapping": plan["inputs"].get("mapping"),
        "mapping_note": "the mapping is hidden from the judge: digested here, never copied into a packet",
    }
    atomic_write_json(manifest_path, manifest)
    return manifest


def export_records(rows: Sequence[Mapping[str, Any]], condition: str) -> list[dict[str, Any]]:
    """A condition's final judgments in the import format (winner as displayed; null if invalid)."""
    out = []
    for r in rows:
        if r.get("kind") != "judgment" or r["condition"] != condition or not r["final"]:
            continue
        out.append(
            {
                "prompt_id": r["item"],
                "replicate": r["replicate"],
                "evaluation_id": f"{condition}:{r['item']}:{r['replicate']}",
                "winner": r["winner"],
                "confidence": r["confidence"],
                "reason": r["reason"],
            }
        )
    return out


def write_results(
    out: Path, rows: Sequence[Mapping[str, Any]], plan: Mapping[str, Any], judge: Mapping[str, Any]
) -> dict[str, Any]:
    """The per-condition result files and their manifest, written after every judgment."""
    written: dict[str, str] = {}
    for cid in plan["packets"]:
        rel = f"results/results_{cid}.json"
        atomic_write_json(out / rel, export_records(rows, cid))
        written[rel] = file_sha256(out / rel)
    design = next((r for r in rows if r.get("kind") == "design"), {})
    execution = {
        "judge": judge.get("name"),
        "isolation": design.get("isolation"),
        "note": "written by lmaudit after judging; winners as displayed",
    }
    atomic_write_json(out / "results/execution.json", execution)
    written["results/execution.json"] = file_sha256(out / "results/execution.json")
    manifest = {
        "status": "completed judgments (frozen before analysis)",
        "plan_digest": plan["plan_digest"],
        "protocol_manifest_sha256": file_sha256(out / "manifest.json"),
        "judge": dict(judge),
        "isolation": design.get("isolation"),
        "deviations": design.get("deviations", []),
        "files": written,
    }
    atomic_write_json(out / "result_manifest.json", manifest)
    return manifest
