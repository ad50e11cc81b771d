"""Length bias of an imported judge (lmaudit.studies.judge.length): the longer-answer share
against scipy.stats.binomtest, the length-controlled win rate against the closed form of a
two-point design and on planted data with a known effect, the lengths the FastChat and
AlpacaEval readers record, and the section through the pipeline."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from lmaudit.interop.fastchat import lengths
from lmaudit.pipeline import run
from lmaudit.studies.judge.length import LengthVerdict, length_controlled, longer_wins, verdicts_of
from lmaudit.studies.registry import get_study


def v(winner, a_chars, b_chars, a_words=None, b_words=None, ma="x", mb="y") -> LengthVerdict:
    return LengthVerdict(
        winner,
        ma,
        mb,
        {"chars": a_chars, "words": a_chars if a_words is None else a_words},
        {"chars": b_chars, "words": b_chars if b_words is None else b_words},
    )


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def test_longer_wins_counts_and_test_match_scipy() -> None:
    verdicts = [
        v("A", 300, 100),  # longer won
        v("B", 300, 100),  # shorter won
        v("B", 50, 90),  # longer won
        v("A", 80, 80),  # equal length: left out
        v("TIE", 10, 900),  # not decisive
        v("A", 120, 100, a_words=10, b_words=30),  # longer in characters, shorter in words
    ]
    chars = longer_wins(verdicts, "chars", 0.05)
    assert (chars.decisive_unequal, chars.equal_length, chars.longer_won) == (4, 1, 3)
    assert chars.p_value == pytest.approx(stats.binomtest(3, 4).pvalue, rel=1e-12)
    ci = stats.binomtest(3, 4).proportion_ci(confidence_level=0.95, method="exact")
    assert (chars.ci.low, chars.ci.high) == pytest.approx((ci.low, ci.high), rel=1e-9)
    words = longer_wins(verdicts, "words", 0.05)
    assert (words.decisive_unequal, words.longer_won) == (4, 2)


def test_length_controlled_rate_matches_the_two_point_closed_form() -> None:
    """With the length difference taking two values +-d, the unpenalised logistic fit reproduces
    the observed win share at each, so the rate at 0 is sigmoid((logit p+ + logit p-) / 2)."""
    wins_long, n_long, wins_short, n_short = 30, 40, 9, 30
    verdicts = (
        [v("A", 1500, 500)] * wins_long
        + [v("B", 1500, 500)] * (n_long - wins_long)
        + [v("A", 500, 1500)] * wins_short
        + [v("B", 500, 1500)] * (n_short - wins_short)
    )
    got = length_controlled(verdicts).models["x"]
    p_long, p_short = wins_long / n_long, wins_short / n_short
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    assert got.length_controlled == pytest.approx(sigmoid((logit(p_long) + logit(p_short)) / 2), abs=1e-4)
    assert got.slope_per_1000_chars == pytest.approx((logit(p_long) - logit(p_short)) / 2, abs=1e-3)
    assert got.win_rate == pytest.approx((wins_long + wins_short) / (n_long + n_short))
    y = length_controlled(verdicts).models["y"]  # the mirror image
    assert y.length_controlled == pytest.approx(1 - got.length_controlled, abs=1e-4)


def test_length_controlled_rate_recovers_a_planted_effect() -> None:
    """Planted: logit P(x wins) = 0.4 + 1.5 * (length difference in thousands of characters),
    x's answers longer on average (difference ~ N(0.5, 0.5)); 4000 verdicts, seed 5. The raw
    rate is inflated by length; the length-controlled rate is sigmoid(0.4) within 0.03 (about
    3 standard errors of the intercept at this size)."""
    rng = np.random.default_rng(5)
    diff = rng.normal(0.5, 0.5, 4000)
    won = rng.random(4000) < 1 / (1 + np.exp(-(0.4 + 1.5 * diff)))
    verdicts = [v("A" if w else "B", 1000 + round(1000 * d), 1000) for d, w in zip(diff, won, strict=True)]
    got = length_controlled(verdicts).models["x"]
    assert got.length_controlled == pytest.approx(sigmoid(0.4), abs=0.03)
    assert got.slope_per_1000_chars == pytest.approx(1.5, abs=0.15)
    assert got.win_rate > sigmoid(0.4) + 0.05  # the raw rate credits length


def test_no_fit_when_the_verdicts_cannot_identify_it() -> None:
    got = length_controlled([v("A", 200, 100), v("A", 300, 100)]).models["x"]
    assert not got.evaluable and got.length_controlled is None and "same way" in got.reason
    sep = length_controlled([v("A", 200, 100), v("B", 100, 200), v("A", 300, 100), v("B", 50, 100)])
    assert not sep.models["x"].evaluable and "separates" in sep.models["x"].reason


PAIR_V2 = (
    "[User Question]\nq\n\n[The Start of Assistant A's Answer]\n{a}\n[The End of Assistant A's Answer]\n\n"
    "[The Start of Assistant B's Answer]\n{b}\n[The End of Assistant B's Answer]"
)
MULTI = (
    "<|The Start of Assistant A's Conversation with User|>\n\n### User:\nq1\n\n### Assistant A:\n{a1}\n\n"
    "### User:\nq2\n\n### Assistant A:\n{a2}\n\n<|The End of Assistant A's Conversation with User|>\n\n\n"
    "<|The Start of Assistant B's Conversation with User|>\n\n### User:\nq1\n\n### Assistant B:\n{b1}\n\n"
    "### User:\nq2\n\n### Assistant B:\n{b2}\n\n<|The End of Assistant B's Conversation with User|>"
)


def test_fastchat_prompts_give_each_answers_length_in_the_original_orientation() -> None:
    g1 = PAIR_V2.format(a="one two three", b="four")
    assert lengths(g1, swap=False) == {"A": {"chars": 13, "words": 3}, "B": {"chars": 4, "words": 1}}
    g2 = PAIR_V2.format(a="four", b="one two three")  # g2 shows model_2 as Assistant A
    assert lengths(g2, swap=True) == lengths(g1, swap=False)
    multi = MULTI.format(a1="a b", a2="c", b1="dd", b2="e f g")
    assert lengths(multi, swap=False) == {"A": {"chars": 5, "words": 3}, "B": {"chars": 8, "words": 4}}
    assert lengths("[A]m1 one[/A] [B]m2 one[/B]", swap=False) is None and lengths(None, swap=True) is None


def test_verdicts_of_reads_rows_with_lengths_only() -> None:
    size = {"A": {"chars": 3, "words": 1}, "B": {"chars": 5, "words": 2}}
    base = {"kind": "judgment", "final": True, "valid": True, "winner_original": "A"}
    rows = [
        {**base, "pair": {"models": {"A": "x", "B": "y"}, "lengths": size}},
        {**base, "pair": {"models": {"A": "x", "B": "y"}}},
        {
            **base,
            "valid": False,
            "winner_original": None,
            "pair": {"models": {"A": "x", "B": "y"}, "lengths": size},
        },
    ]
    assert verdicts_of(rows) == [LengthVerdict("A", "x", "y", size["A"], size["B"])]


def test_the_pipeline_reports_length_for_alpaca_eval_annotations(make_cfg, tmp_path) -> None:
    anns = []
    rng = np.random.default_rng(2)
    for i in range(30):
        long_model = i % 3 != 0  # the model's answer is the longer one in 20 of 30
        model = "m" * (200 if long_model else 50) + f" {i}"
        ref = "r" * 100 + f" {i}"
        switched = bool(rng.random() < 0.5)
        model_won = long_model or i % 2 == 0
        anns.append(
            {
                "instruction": f"task {i}",
                "output_1": ref,
                "generator_1": "ref",
                "output_2": model,
                "generator_2": "model",
                "annotator": "gpt4",
                "preference": 2.0 if model_won else 1.0,
                "is_switched_outputs": switched,
            }
        )
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(anns, indent=2))
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="len"))
    res = json.loads((tmp_path / "len/results.json").read_text())
    longer = sum((a["preference"] == 2.0) == (len(a["output_2"]) > len(a["output_1"])) for a in anns)
    got = res["length"]["longer_wins"]["chars"]
    assert (got["decisive_unequal"], got["longer_won"]) == (30, longer)
    assert got["p_value"] == pytest.approx(stats.binomtest(longer, 30).pvalue, rel=1e-12)
    assert set(res["length"]["length_controlled"]["models"]) == {"model", "ref"}
    metrics = get_study("judge").result(res).metrics  # what MLflow logs
    assert metrics["length.longer_wins.chars.longer_won"] == longer
    assert "length.win_rate.model.raw" in metrics
    html = (tmp_path / "len/report.html").read_text()
    assert 'id="length"' in html and "length-controlled win rate" in html
