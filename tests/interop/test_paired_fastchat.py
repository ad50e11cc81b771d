"""Two judges' FastChat pair files over the same questions and model pairs (lines with the
fields FastChat's ``play_a_match_pair`` writes), each imported as a judge run, then paired
prompt by prompt with ``lmaudit compare``: the judge's name, part of an imported prompt id,
is what the runs differ in."""

from __future__ import annotations

import json
import random

import pytest
from scipy import stats
from test_judge_fastchat import line, write

from lmaudit.console import main
from lmaudit.pipeline import run

WINNERS = ("model_1", "model_2", "tie")


def _lines(judge: str, seed: int, n: int = 14) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for q in range(n):
        g1 = rng.choice(WINNERS)
        g2 = g1 if rng.random() < 0.5 else rng.choice(WINNERS)
        out.append(line(100 + q, "gpt-4", "vicuna-13b", g1, g2, judge=judge))
    out.append(line(200, "gpt-4", "vicuna-13b", "error", "model_1", judge=judge))  # no valid pair
    return out


def test_two_judges_pair_prompt_by_prompt_with_exact_mcnemar(make_cfg, tmp_path, capsys) -> None:
    a_lines, b_lines = _lines("gpt-4", 1), _lines("claude-v1", 2)
    for name, lines in (("a", a_lines), ("b", b_lines)):
        path = write(tmp_path / f"{name}_pair.jsonl", lines)
        run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name=name))
    out = tmp_path / "paired.json"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json", str(out)]) == 0
    assert "SWAP vs P0" in capsys.readouterr().out
    (cond,) = json.loads(out.read_text())["paired"]["conditions"]
    assert cond["condition"] == "SWAP"
    # a prompt flips when its verdict changes with the order (to or from a tie too); the error
    # line has no valid pair and is left out
    flip_a = {x["question_id"]: x["g1_winner"] != x["g2_winner"] for x in a_lines[:-1]}
    flip_b = {x["question_id"]: x["g1_winner"] != x["g2_winner"] for x in b_lines[:-1]}
    assert [r["item"] for r in cond["items"]] == [f"q{q}|t1|gpt-4|vicuna-13b|pair-v2" for q in flip_a]
    assert [(r["a"], r["b"]) for r in cond["items"]] == [(flip_a[q], flip_b[q]) for q in flip_a]
    n10 = sum(flip_a[q] and not flip_b[q] for q in flip_a)
    n01 = sum(flip_b[q] and not flip_a[q] for q in flip_a)
    assert n10 + n01 > 0
    assert cond["p_value"] == pytest.approx(stats.binomtest(n10, n10 + n01, 0.5).pvalue, abs=1e-12)
