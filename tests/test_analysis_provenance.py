"""An analysis records the model that was measured, not the one on the command line, and a
registration refuses measurements made with another model."""

from __future__ import annotations

import json
import sqlite3

import pytest

from lmaudit.errors import InputError
from lmaudit.pipeline import run


def test_analyze_records_the_measured_model_not_the_configs(make_cfg, tmp_path):
    run(make_cfg("model=sim_projective", "items=sim_demo", name="d"))
    run(make_cfg("model=sim_mixture", "items=sim_demo", "stage=analyze", name="d"))
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    runs = con.execute("select run_uuid, name from runs order by start_time").fetchall()
    assert len(runs) == 2
    last = runs[-1][0]
    params = dict(con.execute("select key, value from params where run_uuid = ?", (last,)).fetchall())
    assert params["model.name"] == "sim-projective" and params["model.agent"] == "projective"
    assert "-sim-projective" in runs[-1][1]
    audit = json.loads((tmp_path / "d" / "audit_record.json").read_text())
    assert audit["analyze"]["measured_under"]["model"] == "sim-projective"
    assert audit["measure"]["backend_identity"]["agent"] == "projective"


def test_a_registration_refuses_measurements_of_another_model(make_cfg, tmp_path):
    run(make_cfg("model=sim_projective", "mlflow.enabled=false", name="other"))
    reg = ("prereg=qq_sim_mixture", f"paths.prereg={tmp_path / 'prereg'}", "mlflow.enabled=false")
    run(make_cfg(*reg, "stage=freeze"))  # a registration of the mixture agent, frozen here
    with pytest.raises(InputError, match=r"made with another model.*model\.agent"):
        run(
            make_cfg(
                *reg,
                "stage=analyze",
                f"measurements={tmp_path / 'other' / 'measurements.jsonl'}",
                name="scored",
            )
        )
    assert not (tmp_path / "scored" / "results.json").exists()
