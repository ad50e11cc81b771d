"""Response strings travel byte for byte from the candidate file to the judge's request, and the
model mapping never reaches a packet, a prompt or a request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_helpers import MODELS, TRICKY, write_candidates

from lmaudit.backends.sim.judge import SimJudge
from lmaudit.errors import InputError
from lmaudit.pipeline import run
from lmaudit.provenance.digest import file_sha256
from lmaudit.studies.judge.packets import (
    Condition,
    JudgeText,
    check_template,
    displayed,
    fill_template,
    judge_messages,
    load_candidates,
)

PREFIX, SUFFIX = "<<<BEGIN CANDIDATE RESPONSE>>>\n", "\n<<<END CANDIDATE RESPONSE>>>"


class SpyJudge(SimJudge):
    """The sim judge, recording every request it is sent."""

    seen: list[Any]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.seen = []

    def sample(self, requests):  # type: ignore[no-untyped-def]
        self.seen += requests
        return super().sample(requests)

    def label_logprobs(self, requests, top_k=10):  # type: ignore[no-untyped-def]
        self.seen += requests
        return super().label_logprobs(requests, top_k)


@pytest.fixture
def spy(monkeypatch):
    holder: dict[str, SpyJudge] = {}

    def build(model_cfg):  # type: ignore[no-untyped-def]
        holder["judge"] = SpyJudge(seed=0, noise=0.5)
        return holder["judge"]

    monkeypatch.setattr("lmaudit.backends.registry.build_backend", build)
    return holder


def _raw_strings(path: Path) -> dict[str, dict[str, str]]:
    """The candidate strings decoded straight from the file's bytes (an independent reader)."""
    out = {}
    for line in path.read_bytes().split(b"\n"):
        if line.strip():
            obj = json.loads(line.decode("utf-8"))
            out[obj["prompt_id"]] = obj
    return out


def test_fill_template_is_single_pass():
    t = "{rubric}|{prompt}|{response_a}|{response_b}|end"
    got = fill_template(
        t, {"rubric": "R", "prompt": "{response_a}", "response_a": "{response_b}", "response_b": "B"}
    )
    assert got == "R|{response_a}|{response_b}|B|end"


def test_template_must_end_with_its_own_text():
    text = JudgeText("r", "{rubric}{prompt}{response_a}{response_b}", PREFIX, SUFFIX, "x")
    with pytest.raises(InputError, match="end with text"):
        check_template(text, "t")
    with pytest.raises(InputError, match="once"):
        check_template(JudgeText("r", "{rubric}{prompt}{response_a} end", PREFIX, SUFFIX, "x"), "t")


def test_displayed_strings_wrap_and_swap_exactly(tmp_path):

    cpath, _ = write_candidates(tmp_path, TRICKY)
    raw = _raw_strings(cpath)
    text = JudgeText("R", "{rubric}\n{prompt}\n{response_a}\n{response_b}\nend", PREFIX, SUFFIX, "x")
    for c in load_candidates(cpath):
        a0, b0 = raw[c.prompt_id]["response_a"], raw[c.prompt_id]["response_b"]
        assert (c.response_a, c.response_b) == (a0, b0)
        assert displayed(c, Condition("P0", frozenset()), text) == (a0, b0)
        assert displayed(c, Condition("PA", frozenset("A")), text) == (PREFIX + a0 + SUFFIX, b0)
        assert displayed(c, Condition("PB", frozenset("B")), text) == (a0, PREFIX + b0 + SUFFIX)
        assert displayed(c, Condition("S", frozenset(), swap=True), text) == (b0, a0)
        user = judge_messages(c, Condition("PAB", frozenset("AB")), text)[-1]["content"]
        assert user == f"R\n{c.prompt}\n{PREFIX}{a0}{SUFFIX}\n{PREFIX}{b0}{SUFFIX}\nend"


def test_candidate_file_errors_name_file_line_and_field(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"prompt_id": "X", "prompt": "q", "response_a": "a", "response_b": "b", "model": "m"}\n')
    with pytest.raises(InputError, match=r"c.jsonl: line 1: unknown field\(s\) \['model'\]"):
        load_candidates(p)
    p.write_text('{"prompt_id": "X", "prompt": "q", "response_a": 3, "response_b": "b"}\n')
    with pytest.raises(InputError, match="line 1: field 'response_a' must be a string"):
        load_candidates(p)


def test_bytes_survive_end_to_end_and_mapping_stays_hidden(judge_cfg, tmp_path, spy):
    cfg = judge_cfg("judge/condition=all", "study.k=2", rows=TRICKY, name="tricky")
    run(cfg)
    out = tmp_path / "tricky"
    raw = _raw_strings(Path(cfg.study.candidates_path))
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    art = out / "artifacts"
    manifest = json.loads((art / "manifest.json").read_text(encoding="utf-8"))
    # packets on disk: their manifest digests, and the exact displayed strings
    for cid in ("P0", "PA", "PB", "PAB", "SWAP"):
        rel = f"packets/judge_{cid}.json"
        assert manifest["files"][rel] == file_sha256(art / rel) == plan["inputs"]["packets"][cid]
        packet = json.loads((art / rel).read_bytes().decode("utf-8"))
        for it in packet["items"]:
            a0, b0 = raw[it["prompt_id"]]["response_a"], raw[it["prompt_id"]]["response_b"]
            a, b = (b0, a0) if cid == "SWAP" else (a0, b0)
            a = PREFIX + a + SUFFIX if cid in ("PA", "PAB") else a
            b = PREFIX + b + SUFFIX if cid in ("PB", "PAB") else b
            assert (it["response_a"], it["response_b"]) == (a, b)
            assert (
                f"[Response A]\n{a}\n\n[Response B]\n{b}\n\n[End of responses]"
                in it["messages"][-1]["content"]
            )
    assert manifest["files"]["rubric.md"] == plan["inputs"]["rubric"]["sha256"]
    assert manifest["mapping"]["sha256"] == file_sha256(cfg.study.mapping_path)
    # every request the judge received carries the strings unchanged, and no model name
    judge = spy["judge"]
    assert len(judge.seen) >= 5 * 4 * 2
    for req in judge.seen:
        content = req.messages[0]["content"]
        pid = req.meta["item"]
        for s in (raw[pid]["response_a"], raw[pid]["response_b"]):
            assert s in content
        blob = json.dumps([list(req.messages), req.meta], ensure_ascii=False)
        assert not any(m in blob for m in MODELS)
    # nothing the judge could see names a model: packets, rubric, analysis plan, plan's packets
    for f in [*(art / "packets").iterdir(), art / "rubric.md", art / "analysis_plan.json"]:
        assert not any(m in f.read_text(encoding="utf-8") for m in MODELS), f
    assert not any(m in json.dumps(plan["packets"], ensure_ascii=False) for m in MODELS)
    # ...while the analysis unblinds with it
    res = json.loads((out / "results.json").read_text())
    assert res["model_wins"]["evaluable"] and set(res["model_wins"]["models"]) == set(MODELS)


def test_edited_packet_refuses_to_be_judged_again(judge_cfg, tmp_path):
    cfg = judge_cfg("judge/condition=P0", name="frozen")
    run(cfg)
    p = tmp_path / "frozen/artifacts/packets/judge_P0.json"
    p.write_text(p.read_text().replace("Question 1?", "Question 1 (edited)?"))
    with pytest.raises(InputError, match="edited after freezing"):
        run(judge_cfg("judge/condition=P0", "stage=measure", name="frozen"))
