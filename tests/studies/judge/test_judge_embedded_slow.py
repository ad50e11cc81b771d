"""The embedded model (Gemma 3 270M, a base checkpoint) as judge, with tiny settings: the
pipeline completes, every verdict is parsed strictly, and unparseable ones are counted."""

from __future__ import annotations

import json

import pytest

from lmaudit.pipeline import run


@pytest.mark.slow
def test_embedded_judge_runs_and_reports_invalid_honestly(make_cfg, tmp_path):
    cfg = make_cfg(
        "study=judge",
        "judge/condition=position",
        "study.prompt_ids=[D001,D002]",
        "study.max_tokens=12",
        "study.retry.max_attempts=1",
        "mlflow.enabled=false",
        name="emb",
    )
    run(cfg)
    out = tmp_path / "emb"
    res = json.loads((out / "results.json").read_text())
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    judg = [r for r in rows if r["kind"] == "judgment"]
    assert len(judg) == 4 and all(isinstance(r["raw"], str) for r in judg)
    v = res["validity"]
    assert v["judgments"] == 4 and v["valid"] + v["invalid"] == 4
    assert v["invalid"] == sum(not r["valid"] for r in judg)
    assert all(r["winner"] is None for r in judg if not r["valid"])
    # the readout: P(A), P(B), P(TIE) at the verdict position (TIE read as its first token)
    readout = [r for r in rows if r["kind"] == "readout"]
    assert len(readout) == 4
    for r in readout:
        assert set(r["probs"]) == {"A", "B", "TIE"} and 0.0 <= sum(r["probs"].values()) <= 1.0 + 1e-9
    assert res["readout"]["SWAP"]["shift_vs_reference"]["mean"].keys() == {"A", "B", "TIE"}
    assert (out / "report.html").stat().st_size > 0
