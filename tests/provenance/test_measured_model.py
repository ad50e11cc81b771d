"""The measured model: one record written by the pipeline into the audit record, read back by
one function (MLflow's model tag, the qq report, run comparison), old records read too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.pipeline import run
from lmaudit.pipeline.mlflow_run import measured_model
from lmaudit.provenance.measured_model import (
    MeasuredModel,
    read_measured_model,
    read_run_measured_model,
)
from lmaudit.studies.layout import ReportInputs
from lmaudit.studies.qq.report.page import render_report
from lmaudit.studies.registry import get_study
from lmaudit.tracking.paired import load_run


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_run_records_its_measured_model_once_and_reads_it_back(make_cfg, tmp_path) -> None:
    cfg = make_cfg("model=sim_projective", "mlflow.enabled=false", name="proj")
    run(cfg)
    out = tmp_path / "proj"
    audit = _json(out / "audit_record.json")
    measure = audit["measure"]
    assert audit["measured_model"] == {
        "name": str(cfg.model.name),
        "backend": "sim",
        "identity": measure["backend_identity"],
        "digest": measure["backend_digest"],
        "imported": False,
    }
    model = read_run_measured_model(out)
    assert model == MeasuredModel.from_json(audit["measured_model"], "x")
    assert model.tag == str(cfg.model.name)

    # every reader takes the record, not the plan's or the MLflow section's copy of the model
    audit["measured_model"]["name"] = "recorded-model"
    (out / "audit_record.json").write_text(json.dumps(audit))
    results, plan = _json(out / "results.json"), _json(out / "plan.json")
    result = get_study("qq").result(results)
    assert measured_model(result, audit) == "recorded-model"
    html = render_report(ReportInputs(result.results, plan, audit))
    assert "recorded-model" in html
    assert load_run(out).model() == "recorded-model"


def test_an_old_audit_record_is_read_from_the_fields_that_named_the_model() -> None:
    identity = {"kind": "hf", "model": "org/model-1"}
    audit = {"measure": {"backend": {"kind": "hf"}, "backend_identity": identity, "backend_digest": "d1"}}
    plan = {"config": {"model": {"name": "model-1", "backend": "hf"}}}
    assert read_measured_model(audit, plan) == MeasuredModel("model-1", "hf", identity, "d1", False)
    # no plan: the MLflow section's params, else the backend's identity
    with_params = {**audit, "mlflow": {"params": {"model": {"name": "from-params", "backend": "hf"}}}}
    assert read_measured_model(with_params).name == "from-params"
    assert read_measured_model(audit).name == "org/model-1"
    # measurements imported: no backend answered
    imported = {
        "measure": {"backend": None},
        "mlflow": {"params": {"model": {"name": "x", "backend": "import"}}},
    }
    model = read_measured_model(imported)
    assert model.imported and model.tag == "imported" and model.digest is None


def test_a_record_that_names_no_model_is_refused_in_one_line(tmp_path) -> None:
    (tmp_path / "audit_record.json").write_text(json.dumps({"plan": {}}))
    with pytest.raises(InputError) as e:
        read_run_measured_model(tmp_path)
    assert str(tmp_path / "audit_record.json") in str(e.value) and "\n" not in str(e.value)
    (tmp_path / "audit_record.json").write_text(json.dumps({"measured_model": {"name": 3}}))
    with pytest.raises(InputError, match=r"audit_record\.json: field 'measured_model\.name'"):
        read_run_measured_model(tmp_path)
