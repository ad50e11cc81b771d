"""The run's protocol and result records, with their SHA-256 manifests, as the exact bytes
the pipeline writes under the run's ``artifacts/`` folder.

Before the first judgment: ``packets/judge_<condition>.json`` (what the judge sees),
``rubric.md``, ``analysis_plan.json`` and ``manifest.json`` (their digests, plus the candidate
set's and the hidden mapping's; the mapping itself is not copied); the pipeline refuses to
judge when one of them was edited after freezing. After judging:
``results/results_<condition>.json`` (the import format, so a run's results can be
re-imported), ``results/execution.json`` and ``result_manifest.json``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from lmaudit.provenance.io import dumps_json
from lmaudit.studies.judge.packets import packet_bytes

__all__ = ["protocol_artifacts", "result_artifacts"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def protocol_files(plan: Mapping[str, Any]) -> dict[str, bytes]:
    """The protocol files of a plan, by path relative to the run folder, as exact bytes."""
    files = {f"packets/judge_{cid}.json": packet_bytes(p) for cid, p in plan["packets"].items()}
    files["rubric.md"] = str(plan["rubric"]).encode("utf-8")
    files["analysis_plan.json"] = dumps_json(plan["analysis_plan"]).encode("utf-8")
    return files


def _json_bytes(obj: Any) -> bytes:
    return dumps_json(obj).encode("utf-8")


def protocol_artifacts(plan: Mapping[str, Any]) -> dict[str, bytes]:
    """The packets, rubric and analysis plan, and ``manifest.json`` with their digests: frozen
    by the pipeline before the first judgment (an edited file refuses to be judged again)."""
    files = protocol_files(plan)
    manifest = {
        "status": "pre-judgment: packets, rubric and analysis plan frozen before any judgment",
        "plan_digest": plan["plan_digest"],
        "files": {rel: _sha(data) for rel, data in files.items()},
        "candidates": plan["inputs"]["candidates"],
        "mapping": plan["inputs"].get("mapping"),
        "mapping_note": "the mapping is hidden from the judge: digested here, never copied into a packet",
    }
    return {**files, "manifest.json": _json_bytes(manifest)}


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


def result_artifacts(
    rows: Sequence[Mapping[str, Any]], plan: Mapping[str, Any], judge: Mapping[str, Any]
) -> dict[str, bytes]:
    """The per-condition result files (the import format, so a run can be re-imported),
    ``results/execution.json`` and ``result_manifest.json`` with their digests."""
    files: dict[str, bytes] = {}
    for cid in plan["packets"]:
        files[f"results/results_{cid}.json"] = _json_bytes(export_records(rows, cid))
    design = next((r for r in rows if r.get("kind") == "design"), {})
    execution = {
        "judge": judge.get("name"),
        "isolation": design.get("isolation"),
        "note": "written by lmaudit after judging; winners as displayed",
    }
    files["results/execution.json"] = _json_bytes(execution)
    manifest = {
        "status": "completed judgments (frozen before analysis)",
        "plan_digest": plan["plan_digest"],
        "protocol_manifest_sha256": _sha(protocol_artifacts(plan)["manifest.json"]),
        "judge": dict(judge),
        "isolation": design.get("isolation"),
        "deviations": design.get("deviations", []),
        "files": {rel: _sha(data) for rel, data in files.items()},
    }
    return {**files, "result_manifest.json": _json_bytes(manifest)}
