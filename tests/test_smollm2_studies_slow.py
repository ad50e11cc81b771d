"""Every study on the second embedded model, SmolLM2-135M-Instruct (real weights, small designs):
qq's gate G1 on its own tokenizer and ChatML template, draws sampled from it, the judge study's
default model answering from its log-prob readout when its text verdicts are invalid, and choir's
default ensemble of the two embedded models with degenerate repetitions counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lmaudit.pipeline import run
from lmaudit.provenance.digest import sha256_text

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = "embedded:smollm2-135m@"


def _read(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    audit = json.loads((out / "audit_record.json").read_text())
    return json.loads((out / "results.json").read_text()), rows, audit


def test_qq_on_smollm2_uses_its_own_template_and_g1_passes(make_cfg, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from lmaudit.backends.hf.embedded import ensure_embedded_model

    run(make_cfg("model=smollm2_135m", "items.ids=[s1-01,s3-01]", "mlflow.enabled=false", name="qq"))
    res, rows, audit = _read(tmp_path / "qq")
    ident = audit["measure"]["backend_identity"]
    assert ident["model"].startswith(SMOLLM2)
    # the chat template is the one its tokenizer carries (ChatML), not a config's
    own = AutoTokenizer.from_pretrained(
        str(ensure_embedded_model(model="embedded:smollm2-135m"))
    ).chat_template
    assert ident["chat_template_sha256"] == sha256_text(own) and "<|im_start|>" in own
    assert res["gates"]["G1"]["status"] == "PASS" and res["n_items"] == 2
    pos = [r for r in rows if r["kind"] == "position"]
    assert pos and all(abs(sum(r["probs"].values()) + r["other"] - 1) < 1e-5 for r in pos)


def test_draws_on_smollm2(make_cfg, tmp_path: Path) -> None:
    run(
        make_cfg(
            "study=draws",
            "model=smollm2_135m",
            "study.probe_ids=[color,planet]",
            "study.replicates=1",
            "study.n=5",
            "study.permutations=999",
            "study.sims_per_step=100",
            f"study.probes_path={REPO / 'data/draws/probes.jsonl'}",
            "mlflow.enabled=false",
            name="draws",
        )
    )
    res, _rows, audit = _read(tmp_path / "draws")
    assert audit["measure"]["backend_identity"]["model"].startswith(SMOLLM2)
    fam = res["families"]["smollm2-135m"]
    assert fam["n_sequences"] == 2 and fam["n_draws"] == 10


def test_judge_defaults_to_smollm2_and_answers_from_the_readout(make_cfg, tmp_path: Path) -> None:
    from lmaudit.studies.judge.report.verdict import verdict
    from lmaudit.studies.judge.results import JudgeResults

    run(
        make_cfg(
            "study=judge",
            "judge/condition=position",
            "study.prompt_ids=[D001,D002]",
            "study.max_tokens=12",
            "mlflow.enabled=false",
            name="judge",
        )
    )
    res, _rows, audit = _read(tmp_path / "judge")
    assert audit["measure"]["backend_identity"]["model"].startswith(SMOLLM2)  # the study's default
    shift = res["readout"]["SWAP"]["shift_vs_reference"]
    assert shift["n"] == 2 and set(shift["mean"]) == set(shift["ci"]) == {"A", "B", "TIE"}
    assert 0.0 <= res["readout"]["P0"]["other"]["mean"] <= res["readout"]["P0"]["other"]["max"] <= 1.0
    v = verdict(JudgeResults.from_json(res, "judge/results.json"))
    if res["validity"]["valid"] == 0:  # the text verdicts cannot answer: the readout does
        assert v.answered and v.headline.startswith("From the log-prob readout")
    html = (tmp_path / "judge" / "report.html").read_text()
    assert v.headline.split(":")[0] in html


def test_choir_default_ensemble_is_the_two_embedded_models(make_cfg, tmp_path: Path) -> None:
    run(
        make_cfg(
            "study=choir",
            "study.question_ids=[H001,H007]",
            "study.personas=[archivist]",
            "study.max_tokens=48",
            "study.n_boot=50",
            "study.n_null=20",
            "mlflow.enabled=false",
            name="choir",
        )
    )
    res, rows, _audit = _read(tmp_path / "choir")
    assert res["design"]["models"] == ["gemma3-270m", "smollm2-135m"]
    lists = [r for r in rows if r["kind"] == "list"]
    assert {r["model"] for r in lists} == {"gemma3-270m", "smollm2-135m"} and len(lists) == 8
    dropped = sum(r["extraction"]["degenerate"] for r in lists)
    assert res["design"]["degenerate_items"] == res["summary"]["n_degenerate_items"] == dropped
    page = (tmp_path / "choir" / "report.html").read_text()
    assert "sim-" not in " ".join(res["design"]["models"]) and "simulator" not in page.lower()
    s = res["summary"]
    if not s["above_chance_significant"]:  # never 'beyond chance' without its test
        assert "The members agree beyond chance" not in page
