"""Strict verdict parsing; invalid output is kept raw, retried per the policy, counted, never coerced."""

from __future__ import annotations

import json

import pytest

from lmaudit.pipeline import run
from lmaudit.studies.judge.parse import parse_verdict

VALID = [
    ("WINNER: A\nCONFIDENCE: 0.85\nREASON: A is right.", "A", 0.85, "A is right."),
    ("  WINNER: TIE\r\nCONFIDENCE: 1.00\r\nREASON: Same.\n\n", "TIE", 1.0, "Same."),
    ("WINNER: B\nCONFIDENCE: 0\nREASON: B is complete.", "B", 0.0, "B is complete."),
    ("WINNER: B\nCONFIDENCE: 1\nREASON: x", "B", 1.0, "x"),
    ("WINNER: A\nCONFIDENCE: 0.7\nREASON: A, though {B} is close.", "A", 0.7, "A, though {B} is close."),
]

INVALID = [
    "",
    "   \n ",
    "A",
    "WINNER: A",
    "WINNER: a\nCONFIDENCE: 0.9\nREASON: x",
    "Winner: A\nCONFIDENCE: 0.9\nREASON: x",
    "WINNER:A\nCONFIDENCE: 0.9\nREASON: x",
    "**WINNER:** A\nCONFIDENCE: 0.9\nREASON: x",
    "WINNER: Response A\nCONFIDENCE: 0.9\nREASON: x",
    "WINNER: A | B | TIE\nCONFIDENCE: 0.9\nREASON: x",
    "WINNER: C\nCONFIDENCE: 0.9\nREASON: x",
    "WINNER: A\nCONFIDENCE: 95%\nREASON: x",
    "WINNER: A\nCONFIDENCE: 1.5\nREASON: x",
    "WINNER: A\nCONFIDENCE: .9\nREASON: x",
    "WINNER: A\nCONFIDENCE: <0.00-1.00>\nREASON: x",
    "WINNER: A\nCONFIDENCE: 0.9\nREASON:",
    "WINNER: A\nCONFIDENCE: 0.9\nREASON:    ",
    "WINNER: A\nREASON: x\nCONFIDENCE: 0.9",
    "Sure! WINNER: A\nCONFIDENCE: 0.9\nREASON: x",
    "WINNER: A\nCONFIDENCE: 0.9\nREASON: x\nWINNER: B",
    "WINNER: A\n\nCONFIDENCE: 0.9\nREASON: x",
]


@pytest.mark.parametrize(("raw", "winner", "conf", "reason"), VALID)
def test_valid_verdicts(raw, winner, conf, reason):
    v = parse_verdict(raw)
    assert v.valid and (v.winner, v.confidence, v.reason) == (winner, conf, reason)
    assert v.raw == raw and v.error is None


@pytest.mark.parametrize("raw", INVALID)
def test_invalid_verdicts_are_never_coerced(raw):
    v = parse_verdict(raw)
    assert not v.valid
    assert v.winner is None and v.confidence is None and v.reason is None
    assert v.raw == raw and v.error


def test_invalid_outputs_are_retried_kept_and_counted(judge_cfg, tmp_path):
    cfg = judge_cfg(
        "judge/condition=wrapper",
        "model.params.invalid_rate=0.5",
        "study.retry.max_attempts=3",
        "study.k=2",
        name="inv",
    )
    run(cfg)
    out = tmp_path / "inv"
    rows = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    judg = [r for r in rows if r["kind"] == "judgment"]
    finals = [r for r in judg if r["final"]]
    assert len(finals) == 4 * 12 * 2  # conditions x prompts x k
    # every attempt is a row with its own seed; the raw text is kept; retries only after invalid output
    by_key: dict[tuple, list] = {}
    for r in judg:
        by_key.setdefault((r["condition"], r["item"], r["replicate"]), []).append(r)
    for attempts in by_key.values():
        attempts.sort(key=lambda r: r["attempt"])
        assert [r["attempt"] for r in attempts] == list(range(len(attempts))) and len(attempts) <= 3
        assert all(not r["valid"] and not r["final"] for r in attempts[:-1])
        assert len({r["seed"] for r in attempts}) == len(attempts)
    bad = [r for r in judg if not r["valid"]]
    assert bad and all(r["winner"] is None and r["winner_original"] is None and r["raw"] for r in bad)
    invalid_final = [r for r in finals if not r["valid"]]
    assert invalid_final and all(r["attempt"] == 2 for r in invalid_final)
    res = json.loads((out / "results.json").read_text())
    v = res["validity"]
    assert v["invalid"] == len(invalid_final)
    assert v["attempts"] == len(judg) and v["retries"] == sum(r["attempt"] > 0 for r in judg)
    assert v["recovered_by_retry"] == sum(r["valid"] and r["attempt"] > 0 for r in finals)
    for cid, s in res["conditions"].items():
        assert s["counts"]["INVALID"] == sum(1 for r in invalid_final if r["condition"] == cid)
        assert s["counts"]["A"] + s["counts"]["B"] + s["counts"]["TIE"] + s["counts"]["INVALID"] == 24
    # pairs with an invalid side are left out and counted, never compared
    for d in res["disagreement"]:
        if "repeat" in d["comparison"]:
            continue
        assert d["n"] + d["excluded_invalid"] == 24
    # the exported result files carry no label for an invalid judgment
    exported = json.loads((out / "artifacts/results/results_PA.json").read_text())
    assert sum(r["winner"] is None for r in exported) == res["conditions"]["PA"]["counts"]["INVALID"]
    assert "invalid" in (out / "report.html").read_text()
