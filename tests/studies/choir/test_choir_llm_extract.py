"""The LLM extractor: its reply parser, and extraction through a backend in a real run (the
sim extractor agent, whose replies are known), with invalid replies kept raw and counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from choir_quick import QUICK_CHOIR, typed_results
from lmaudit.backends.sim.extractor import SimExtractor
from lmaudit.pipeline import run
from lmaudit.studies.choir.extract import extract_items
from lmaudit.studies.choir.llm_extract import PROMPT_VERSION, extraction_request, parse_reply

COMMON = (
    "study=choir",
    "study.question_ids=[H001,H002]",
    "study.templates=[A]",
    "study.personas=[archivist]",
    "study.generations=3",
    *QUICK_CHOIR,
    "mlflow.enabled=false",
    "study.ensemble.members=[{backend: sim, name: m1, agent: freelist, params: {signature: 1}},"
    "{backend: sim, name: m2, agent: freelist, params: {signature: 2}}]",
    "study.extractor.kind=llm",
)


def _rows(p: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in p.read_text().splitlines()]


def test_parse_reply_accepts_the_asked_shape_only() -> None:
    ok = parse_reply(
        '{"items": [{"text": "**Trust**", "justification": "it lasts"}, "Fairness", {"text": "N/A"}, ""]}', 25
    )
    assert ok.error is None and ok.extraction is not None
    got = [(i.rank, i.text, i.justification) for i in ok.extraction.items]
    assert got == [(1, "Trust", "it lasts"), (2, "Fairness", None)]
    assert (ok.extraction.n_entries, ok.extraction.n_na, ok.extraction.n_empty) == (4, 1, 1)
    fenced = parse_reply('```json\n{"items": ["a", "b", "c"]}\n```', 2)
    assert fenced.extraction is not None and [i.text for i in fenced.extraction.items] == ["a", "b"]
    for bad in (
        "Sure! Here they are: 1. a",
        '{"items": "a, b"}',
        '{"items": [1, 2]}',
        '{"items": [], "note": "x"}',
        '{"items": ["a"], "items": ["b"]}',  # duplicate key
        '{"items": [{"text": "a", "score": 3}]}',
        'Here: {"items": ["a"]}',  # prose around the object
    ):
        res = parse_reply(bad, 25)
        assert res.extraction is None and res.error, bad


def test_the_request_is_deterministic_and_versioned() -> None:
    a, b = extraction_request("1. x\n2. y", 512), extraction_request("1. x\n2. y", 512)
    assert a == b and a.temperature == 0.0 and a.n == 1 and a.max_tokens == 512
    assert a.meta["version"] == PROMPT_VERSION and "1. x\n2. y" in a.messages[0]["content"]


def test_llm_extraction_in_a_run_agrees_with_the_rules_and_counts_invalid_replies(make_cfg, tmp_path):
    run(make_cfg(*COMMON, "study.extractor.model={backend: sim, agent: extractor}", name="clean"))
    rows = _rows(tmp_path / "clean/measurements.jsonl")
    lists = [r for r in rows if r["kind"] == "list"]
    assert lists and all(r["extraction"]["method"] == "llm" and not r["extraction"]["invalid"] for r in lists)
    for r in lists:  # the sim lists are plain numbered entries: both extractors find the same items
        assert [i["text"] for i in r["items"]] == [i.text for i in extract_items(r["raw"], 25).items]
    results = typed_results(tmp_path / "clean/results.json")
    assert results["design"]["extraction"]["invalid"] == 0
    assert results["design"]["extraction"]["lists"] == len(lists)

    agent = "study.extractor.model={backend: sim, agent: extractor, params: {invalid_rate: 0.4}}"
    for policy in ("drop", "rule"):
        name = f"bad-{policy}"
        run(make_cfg(*COMMON, agent, f"study.extractor.on_invalid={policy}", name=name))
        lists = [r for r in _rows(tmp_path / name / "measurements.jsonl") if r["kind"] == "list"]
        judge = SimExtractor(invalid_rate=0.4)
        expected_bad = [r for r in lists if judge.invalid(r["raw"])]
        assert 0 < len(expected_bad) < len(lists)
        flagged = [r for r in lists if r["extraction"]["invalid"]]
        assert [id(r) for r in flagged] == [id(r) for r in expected_bad]
        for r in flagged:
            assert r["extraction"]["reply"].startswith("Sure!")  # the reply is kept raw
            assert r["extraction"]["error"]
            rule = [i.text for i in extract_items(r["raw"], 25).items]
            assert [i["text"] for i in r["items"]] == (rule if policy == "rule" else [])
        results = typed_results(tmp_path / name / "results.json")
        assert results["design"]["extraction"]["invalid"] == len(expected_bad)
        assert results["design"]["empty_lists"] == (len(expected_bad) if policy == "drop" else 0)


def test_extraction_replies_are_cached(make_cfg, tmp_path):
    cfg = make_cfg(*COMMON, "study.extractor.model={backend: sim, agent: extractor}", name="first")
    run(cfg)
    run(make_cfg(*COMMON, "study.extractor.model={backend: sim, agent: extractor}", name="second"))
    a = _rows(tmp_path / "first/measurements.jsonl")
    b = _rows(tmp_path / "second/measurements.jsonl")
    assert a == b
    first = json.loads((tmp_path / "first/audit_record.json").read_text())["measure"]
    second = json.loads((tmp_path / "second/audit_record.json").read_text())["measure"]
    assert first["extraction"]["distinct_answers"] > 0 and first["cache"]["writes"] > 0
    # everything (lists, extraction replies, embeddings) is served from the cache the first run filled
    assert second["cache"]["misses"] == 0 and second["cache"]["writes"] == 0 and second["cache"]["hits"] > 0


@pytest.mark.parametrize("field,value", [("kind", "regex"), ("on_invalid", "skip"), ("max_tokens", 0)])
def test_bad_extractor_settings_are_refused_before_any_call(make_cfg, field, value):
    with pytest.raises(Exception, match=f"extractor.{field}"):
        run(make_cfg(*COMMON, f"study.extractor.{field}={value}", name="refused"))
