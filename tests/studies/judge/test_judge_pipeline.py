"""The judge study through the whole pipeline (Hydra config -> plan -> measure -> analyze ->
report -> MLflow) on the sim judge: run files, manifests, re-analysis, and how a sweep's
single-condition jobs combine."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lmaudit.pipeline import run
from lmaudit.provenance.digest import file_sha256

CONF = Path(__file__).resolve().parents[3] / "conf"
RUN_FILES = (
    "plan.json",
    "measurements.jsonl",
    "results.json",
    "audit_record.json",
    "report.html",
    "artifacts/manifest.json",
    "artifacts/result_manifest.json",
    "artifacts/rubric.md",
    "artifacts/analysis_plan.json",
)
RESULT_KEYS = {
    "study",
    "mode",
    "design",
    "deviations",
    "params",
    "mapping",
    "validity",
    "n_prompts",
    "k",
    "conditions_analysed",
    "reference",
    "conditions",
    "disagreement",
    "classification",
    "patterns",
    "items",
    "model_wins",
    "readout",
    "source",
}


def _json(p: Path) -> dict:
    return json.loads(p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("cond", sorted(p.stem for p in (CONF / "study/judge/condition").glob("*.yaml")))
def test_every_condition_set_composes(make_cfg, cond):
    cfg = make_cfg("study=judge", f"judge/condition={cond}")
    assert cfg.study.condition.conditions and cfg.study.rubric.text.startswith("PAIRWISE JUDGE RUBRIC")
    assert cfg.study.wrapper.prefix == "<<<BEGIN CANDIDATE RESPONSE>>>\n"


def test_full_run_files_manifests_and_mlflow(judge_cfg, tmp_path):
    cfg = judge_cfg("mlflow.enabled=true", "model.params.wrapper_attraction=2.0", name="full")
    run(cfg)
    out = tmp_path / "full"
    art = out / "artifacts"  # the study's own files, written by the pipeline
    for f in RUN_FILES:
        assert (out / f).stat().st_size > 0, f
    res = _json(out / "results.json")
    assert set(res) == RESULT_KEYS
    assert res["conditions_analysed"] == ["P0", "PA", "PB", "PAB", "SWAP"]
    assert [d["comparison"] for d in res["disagreement"]] == [
        f"{c} vs P0" for c in ("PA", "PB", "PAB", "SWAP")
    ]
    assert res["validity"]["judgments"] == 5 * 12 and res["readout"]["PA"]["n_items"] == 12
    # the protocol was frozen before the results, and each manifest matches its files
    manifest, rmanifest = _json(art / "manifest.json"), _json(art / "result_manifest.json")
    for rel, digest in {**manifest["files"], **rmanifest["files"]}.items():
        assert file_sha256(art / rel) == digest, rel
    assert rmanifest["protocol_manifest_sha256"] == file_sha256(art / "manifest.json")
    assert manifest["plan_digest"] == rmanifest["plan_digest"] == _json(out / "plan.json")["plan_digest"]
    assert "pre-judgment" in manifest["status"] and rmanifest["isolation"] == "fresh"
    plan = _json(out / "plan.json")
    assert manifest["files"]["analysis_plan.json"] == plan["inputs"]["analysis_plan"]["sha256"]
    assert manifest["files"]["rubric.md"] == plan["inputs"]["rubric"]["sha256"]
    # the audit record: judge identity, rubric digest, isolation, seeds
    audit = _json(out / "audit_record.json")
    j = audit["judge"]
    assert j["judge"]["identity_digest"] == audit["measure"]["backend_digest"]
    assert j["rubric_sha256"] == manifest["files"]["rubric.md"] and j["isolation"] == "fresh"
    assert j["seed"] == cfg.study.seed and j["deviations"] == []
    seeds = {
        json.loads(x)["seed"]
        for x in (out / "measurements.jsonl").read_text().splitlines()
        if json.loads(x)["kind"] == "judgment"
    }
    assert len(seeds) == 60  # every judgment its own recorded seed
    # MLflow
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    tags = dict(con.execute("select key, value from tags").fetchall())
    metrics = dict(con.execute("select key, value from metrics").fetchall())
    params = dict(con.execute("select key, value from params").fetchall())
    assert tags["isolation"] == "fresh" and tags["deviations"] == "none" and tags["study"] == "judge"
    assert metrics["disagreement.PA.n"] == 12.0 and "P0.confidence_mean" in metrics
    assert any(k.startswith("judge") for k in params)
    html = (out / "report.html").read_text()
    for heading in (
        "Per-prompt condition grid",
        "Winner-label disagreement",
        "Confidence distributions",
        "<svg",
    ):
        assert heading in html


def test_reanalysis_reproduces_results_byte_for_byte(judge_cfg, tmp_path):
    run(judge_cfg("study.k=3", name="first"))
    first = tmp_path / "first"
    run(judge_cfg("study.k=3", "stage=analyze", f"measurements={first / 'measurements.jsonl'}", name="again"))
    assert (tmp_path / "again/results.json").read_bytes() == (first / "results.json").read_bytes()


def test_a_sweeps_single_condition_jobs_combine(judge_cfg, tmp_path):
    rows = None
    for cid in ("P0", "PA", "PB", "PAB"):
        run(judge_cfg(f"judge/condition={cid}", name=f"job-{cid}"))
        res = _json(tmp_path / f"job-{cid}/results.json")
        assert res["conditions_analysed"] == [cid] and res["disagreement"] == []
        assert res["classification"]["evaluable"] is False
    # (1) the all-conditions job is served from the shared cache: no judge call at all
    run(judge_cfg("judge/condition=wrapper", name="combined"))
    audit = _json(tmp_path / "combined/audit_record.json")
    assert audit["measure"]["cache"]["misses"] == 0 and audit["measure"]["cache"]["hits"] > 0
    combined = _json(tmp_path / "combined/results.json")
    assert combined["classification"]["evaluable"]
    # (2) or: analyse the jobs' measurement files together
    merged = tmp_path / "merged.jsonl"
    merged.write_text(
        "".join((tmp_path / f"job-{c}/measurements.jsonl").read_text() for c in ("P0", "PA", "PB", "PAB"))
    )
    run(judge_cfg("judge/condition=wrapper", "stage=analyze", f"measurements={merged}", name="merged"))
    again = _json(tmp_path / "merged/results.json")
    for key in ("disagreement", "classification", "conditions", "items", "model_wins", "readout", "validity"):
        assert again[key] == combined[key], key
    del rows


def test_plan_stage_asks_nothing_and_the_plan_covers_the_inputs(judge_cfg, tmp_path, monkeypatch):
    def boom(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("no backend at plan stage")

    monkeypatch.setattr("lmaudit.backends.registry.build_backend", boom)
    cfg = judge_cfg("stage=plan", name="p")
    run(cfg)
    plan = _json(tmp_path / "p/plan.json")
    assert set(plan["inputs"]) == {"candidates", "mapping", "rubric", "analysis_plan", "packets"}
    assert plan["n_requests"] == 5 * 12
    # the frozen analysis plan names the seed's five primary endpoints (and SWAP's comparison)
    aplan = plan["analysis_plan"]
    ends = aplan["primary_endpoints"]
    assert ends[:4] == [f"winner-label disagreement {c} vs P0" for c in ("PA", "PB", "PAB", "SWAP")]
    assert [e.split(":")[0] for e in ends[4:]] == ["WRAPPER_ATTRACTION_PATTERN", "WRAPPER_AVERSION_PATTERN"]
    run(judge_cfg("stage=plan", "judge/condition=position", name="pos"))
    pos = _json(tmp_path / "pos/plan.json")["analysis_plan"]
    assert pos["primary_endpoints"] == ["winner-label disagreement SWAP vs P0"]  # no PA/PB: no patterns
    cfg2 = judge_cfg("stage=plan", "judge.wrapper.prefix=BEGIN:", name="p2")
    run(cfg2)
    assert _json(tmp_path / "p2/plan.json")["plan_digest"] != plan["plan_digest"]


def test_results_template_has_the_shape_predictions_name(judge_cfg):
    from lmaudit import prereg
    from lmaudit.studies.judge.analysis import results_template

    tmpl = results_template(judge_cfg(name="t"))
    preds = prereg.parse_predictions(
        [
            {"id": "P1", "metric": "disagreement.PA.changed", "op": "==", "value": 0},
            {"id": "P2", "metric": "classification.counts.CONTENT_STABLE", "op": ">=", "value": 1},
            {"id": "P3", "metric": "conditions.P0.confidence.mean", "op": ">", "value": 0.5},
        ],
        "test",
    )
    assert prereg.unknown_metrics(preds, tmpl) == []
    assert [p["outcome"] for p in prereg.score_predictions(preds, tmpl)] == ["held", "held", "held"]
