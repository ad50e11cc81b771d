"""Matched cue stripping: the pairs' data, the design (stripped prompts asked unconditioned
only, kept out of the bank's summary), and the planted echo measured falling with the cues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from choir_quick import QUICK_CHOIR, typed_results
from lmaudit.errors import InputError
from lmaudit.pipeline import run
from lmaudit.studies.choir.data import load_cue_pairs, load_external_prompts

DATA = Path(__file__).resolve().parents[3] / "data" / "choir"
COMMON = (
    "study=choir",
    "study.question_ids=[H001]",
    "study.templates=[A]",
    "study.personas=[archivist]",
    "study.generations=4",
    *QUICK_CHOIR,
    "mlflow.enabled=false",
)


def test_the_shipped_pairs_reword_six_infinity_prompts_without_their_anchors():
    external = load_external_prompts(DATA / "infinity_chat_100.jsonl")
    pairs = load_cue_pairs(DATA / "cue_pairs.jsonl", external)
    text = {p.id: p.text.lower() for p in external}
    assert sorted(p.original for p in pairs) == ["H001", "H007", "H009", "H029", "H030", "H064"]
    for p in pairs:
        assert all(a in text[p.original] for a in p.anchors)
        assert not any(a in p.text.lower() for a in p.anchors), p.id


def test_a_pair_naming_an_anchor_its_prompt_lacks_is_refused(tmp_path):
    external = load_external_prompts(DATA / "infinity_chat_100.jsonl")
    bad = tmp_path / "pairs.jsonl"
    bad.write_text('{"original": "H001", "id": "H001-S", "text": "x", "anchors": ["clock"]}\n')
    with pytest.raises(InputError, match=r"pair 'H001-S': field 'anchors': \['clock'\]"):
        load_cue_pairs(bad, external)


def test_stripping_the_cues_removes_the_planted_echo(make_cfg, tmp_path):
    members = (
        "study.ensemble.members=[{backend: sim, name: m1, agent: freelist, params: {signature: 1, echo: 0.5}},"
        "{backend: sim, name: m2, agent: freelist, params: {signature: 2, echo: 0.5}}]"
    )
    run(make_cfg(*COMMON, members, "study.cue_pairs=[H001,H009]", name="cues"))
    res = typed_results(tmp_path / "cues/results.json")
    rows = [json.loads(x) for x in (tmp_path / "cues/measurements.jsonl").read_text().splitlines()]
    lists = [r for r in rows if r["kind"] == "list"]
    asked = {(r["question"], r["persona"]) for r in lists}
    # the stripped prompts are asked unconditioned only; the extra original (H009) fully
    assert {q for q, p in asked if p != "none"} == {"H001", "H009"}
    assert {q for q, _ in asked} == {"H001", "H009", "H001-S", "H009-S"}
    assert res["summary"]["n_questions"] == 2  # the stripped prompts are not bank prompts
    assert res["questions"]["H001-S"]["stripped_of"] == "H001"
    cues = res["cue_stripping"]
    assert [p["original"] for p in cues["pairs"]] == ["H001", "H009"]
    for p in cues["pairs"]:
        # half the planted entries are question words; the originals' include the anchors
        assert p["before"]["item_echo"] > 0.1
        assert p["after"]["item_echo"] < p["before"]["item_echo"]
        assert p["item_echo_lower"] is True
    assert cues["counts"]["item_echo_lower"] == {"yes": 2, "n": 2}
    assert "Matched cue stripping" in (tmp_path / "cues/report.html").read_text()


def test_cue_pairs_need_the_infinity_bank(make_cfg):
    with pytest.raises(InputError, match="cue_pairs"):
        run(
            make_cfg(
                *COMMON, "study.bank=targeted", "study.question_ids=null", "study.cue_pairs=[H001]", name="x"
            )
        )
