"""Measurements made elsewhere are re-analysed with a minimal item bank (ids, strata, options,
pairings), each record checked against it, the bank recorded in the audit record, and the MLflow
run named after the measurements' source, not the config's model."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.pipeline import run

REPO = Path(__file__).resolve().parents[3]
KEEP = ("id", "stratum", "options", "matched_to")


def _minimal_bank(tmp_path: Path) -> Path:
    full = json.loads((REPO / "data/qq/items/pilot.json").read_text())
    items = [{k: it[k] for k in KEEP if k in it} for it in full["items"] if it["stratum"] != "S1"]
    path = tmp_path / "minimal.json"  # no question texts, no years, and no S1 items to match
    path.write_text(json.dumps({"items": items}))
    return path


def test_external_measurements_are_analysed_with_a_minimal_bank(make_cfg, tmp_path):
    run(make_cfg("model=sim_projective", "mlflow.enabled=false", "study.items.ids=[s2-01,s3-01]", name="src"))
    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "lab_run_7.jsonl").write_bytes((tmp_path / "src" / "measurements.jsonl").read_bytes())
    bank = _minimal_bank(tmp_path)
    run(
        make_cfg(
            "stage=analyze",
            f"measurements={ext / 'lab_run_7.jsonl'}",
            f"study.items.path={bank}",
            "study.items.ids=[s2-01,s3-01]",
            name="again",
        )
    )
    ours = json.loads((tmp_path / "again" / "results.json").read_text())
    theirs = json.loads((tmp_path / "src" / "results.json").read_text())
    assert ours["items"] == theirs["items"] and ours["counts"] == theirs["counts"]
    audit = json.loads((tmp_path / "again" / "audit_record.json").read_text())
    assert audit["analyze"]["inputs"]["items"] == {
        "path": str(bank),
        "sha256": hashlib.sha256(bank.read_bytes()).hexdigest(),
    }
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    ((run_uuid, name),) = con.execute("select run_uuid, name from runs").fetchall()
    params = dict(con.execute("select key, value from params where run_uuid = ?", (run_uuid,)).fetchall())
    assert name == "lab_run_7" and params["model.name"] == "lab_run_7" and "gemma" not in json.dumps(params)


def test_a_record_whose_stratum_disagrees_with_the_bank_is_refused(make_cfg, tmp_path):
    run(make_cfg("model=sim_projective", "mlflow.enabled=false", "study.items.ids=[s2-01]", name="src"))
    rows = [json.loads(x) for x in (tmp_path / "src" / "measurements.jsonl").read_text().splitlines()]
    pos = next(r for r in rows if r.get("kind") == "position")
    pos["stratum"] = "S1"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(InputError, match=r"field 'stratum' = 'S1', but the item bank .* says 'S2'"):
        run(
            make_cfg(
                "stage=analyze",
                f"measurements={bad}",
                f"study.items.path={_minimal_bank(tmp_path)}",
                "mlflow.enabled=false",
                name="x",
            )
        )
