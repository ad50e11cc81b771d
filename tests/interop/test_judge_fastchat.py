"""FastChat MT-bench pairwise judgments imported into the judge study: each line's two orders
become P0 and SWAP rows, the order_swap counts follow, bad lines are refused before anything
is written, and a file written by FastChat's own gen_judgment.py is read.

Most tests build lines with exactly the fields FastChat 0.2.36's ``common.play_a_match_pair``
writes (:func:`line`). ``test_fastchat_own_writer`` runs FastChat's ``gen_judgment.py`` itself
against a local OpenAI-compatible stub judge, in a subprocess with ``PYTHONPATH`` set to the
directory ``scripts/install_judge_tools.sh`` installs ``fschat`` 0.2.36 and its ``llm_judge``
extras into (``<repo>/.tools/fastchat``, or ``$LMAUDIT_FASTCHAT_PATH``): their ``openai<1``
conflicts with lmaudit's own dependencies. It is skipped only when that directory is missing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scipy import stats

from lmaudit.errors import InputError
from lmaudit.interop.fastchat import read_pairs, read_rows
from lmaudit.pipeline import run
from lmaudit.studies.judge.order_swap import classify
from lmaudit.studies.registry import get_study

# the fields play_a_match_pair writes for a pairwise judge, in its order
_FIELDS = (
    "question_id model_1 model_2 g1_winner g2_winner judge g1_user_prompt g1_judgment g2_user_prompt "
    "g2_judgment turn tstamp"
)
FASTCHAT_FIELDS = _FIELDS.split()


def line(qid, m1, m2, g1, g2, turn=1, prompt="pair-v2", judge="gpt-4") -> dict:
    """One line as FastChat writes it (g1: model_1 shown first; winners mapped back to models)."""
    name = prompt if turn == 1 else f"{prompt}-multi-turn"
    head = [qid, m1, m2, g1, g2, [judge, name]]
    tail = ["prompt 1", f"judgment 1 of {qid}", "prompt 2", "judgment 2", turn, 1.7e9]
    return dict(zip(FASTCHAT_FIELDS, head + tail, strict=True))


def write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_each_line_gives_both_orders_in_the_original_orientation(tmp_path) -> None:
    path = write(tmp_path / "gpt-4_pair.jsonl", [line(81, "alpha", "beta", "model_1", "model_2")])
    design, p0, swap = read_rows(path)
    assert design["format"] == "fastchat" and design["isolation"] == "fresh" and design["lines"] == 1
    assert (p0["condition"], p0["swap"], p0["winner"], p0["winner_original"]) == ("P0", False, "A", "A")
    # g2 showed model_2 as "Assistant A"; FastChat mapped its [[A]] back to model_2
    got = (swap["condition"], swap["swap"], swap["winner"], swap["winner_original"])
    assert got == ("SWAP", True, "A", "B")
    assert p0["item"] == swap["item"] == "q81|t1|alpha|beta|gpt-4/pair-v2"
    assert p0["raw"] == "judgment 1 of 81" and swap["raw"] == "judgment 2"
    assert p0["pair"] == {
        "judge_prompt": "gpt-4/pair-v2",
        "models": {"A": "alpha", "B": "beta"},
        "turn": 1,
        "question_id": 81,
    }


def test_error_and_unknown_winners_are_kept_invalid(tmp_path) -> None:
    path = write(tmp_path / "p.jsonl", [line(1, "a", "b", "error", "tie"), line(2, "a", "b", "A", "model_1")])
    _, e1, t2, u1, m2 = read_rows(path)
    assert not e1["valid"] and e1["winner_original"] is None and "'error'" in e1["error"]
    assert t2["valid"] and t2["winner_original"] == "TIE" and t2["winner"] == "TIE"
    assert not u1["valid"] and "'A' is not one of model_1, model_2, tie, error" in u1["error"]
    assert m2["valid"] and m2["winner"] == "B" and m2["winner_original"] == "A"


def test_a_repeated_line_is_a_further_replicate(tmp_path) -> None:
    x = line(1, "a", "b", "model_1", "model_1")
    design, *rows = read_rows(
        write(tmp_path / "p.jsonl", [x, line(1, "a", "b", "model_1", "model_1", turn=2), x])
    )
    assert design["repeated_lines"] == 1
    assert [(r["item"], r["replicate"]) for r in rows if r["condition"] == "P0"] == [
        ("q1|t1|a|b|gpt-4/pair-v2", 0),
        ("q1|t2|a|b|gpt-4/pair-v2-multi-turn", 0),
        ("q1|t1|a|b|gpt-4/pair-v2", 1),
    ]


@pytest.mark.parametrize(
    ("obj", "said"),
    [
        ({**line(1, "a", "b", "tie", "tie"), "turn": "1"}, "line 2: field 'turn' must be an integer >= 1"),
        (
            {**line(1, "a", "b", "tie", "tie"), "judge": "gpt-4"},
            "line 2: field 'judge' must be [judge model, prompt name]",
        ),
        (
            {k: v for k, v in line(1, "a", "b", "tie", "tie").items() if k not in ("g1_winner", "g2_winner")},
            "line 2: missing field(s) ['g1_winner or g2_winner']",
        ),
        ({**line(1, "", "b", "tie", "tie")}, "line 2: field 'model_1' must be a non-empty string"),
        (
            {**line(1, "a", "b", "tie", "tie"), "m1_score": 8, "m2_score": 7},
            "line 2: a single-answer grading record",
        ),
        (
            {
                "question_id": 1,
                "model_1": "a",
                "model_2": "b",
                "winner": "model_a",
                "judge": "expert_0",
                "turn": 1,
            },
            "line 2: one field 'winner' and no g1_winner/g2_winner: the order each answer was shown in is not recorded",
        ),
    ],
)
def test_bad_lines_name_file_line_and_field(tmp_path, obj, said) -> None:
    path = write(tmp_path / "p.jsonl", [line(1, "a", "b", "tie", "tie"), obj])
    with pytest.raises(InputError) as e:
        read_pairs(path)
    assert str(e.value).startswith(f"{path}: {said}")


def _counts(lines: list[dict]) -> Counter:
    to = {"model_1": "A", "model_2": "B", "tie": "TIE", "error": None}
    c = Counter(classify(to[x["g1_winner"]], to[x["g2_winner"]]) for x in lines)
    return Counter({"n": len(lines), **c})


LINES = [
    line(81, "gpt-4", "llama-13b", "model_1", "model_1"),  # consistent
    line(82, "gpt-4", "llama-13b", "model_1", "model_2"),  # first_both
    line(83, "gpt-4", "llama-13b", "model_2", "model_1"),  # second_both
    line(84, "gpt-4", "vicuna-13b", "tie", "model_2"),  # one_tie
    line(85, "gpt-4", "vicuna-13b", "error", "model_2"),  # invalid
    line(81, "gpt-4", "vicuna-13b", "model_1", "model_2", turn=2),  # first_both, turn 2
]


def test_the_pipeline_analyses_a_pair_file(make_cfg, tmp_path) -> None:
    path = write(tmp_path / "gpt-4_pair.jsonl", LINES)
    cfg = make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="fc")
    run(cfg)
    res = json.loads((tmp_path / "fc/results.json").read_text())
    swap = res["order_swap"]
    want = {
        k: _counts(LINES)[k] for k in ("n", "consistent", "first_both", "second_both", "one_tie", "invalid")
    }
    assert (
        swap["counts"]
        == want
        == {"n": 6, "consistent": 1, "first_both": 2, "second_both": 1, "one_tie": 1, "invalid": 1}
    )
    assert swap["flipped"]["first_both"] == 2 and swap["flipped"]["n"] == 3
    # consistent: 1 + 1; first_both: 2 x 2 first; second_both: 2 second; one_tie (TIE, B): B shown first won
    assert swap["per_verdict"]["first"] == 1 + 4 + 1 and swap["per_verdict"]["second"] == 1 + 2
    assert list(swap["by_turn"]) == ["1", "2"] and swap["by_turn"]["2"]["counts"]["first_both"] == 1
    assert list(swap["by_judge_prompt"]) == ["gpt-4/pair-v2", "gpt-4/pair-v2-multi-turn"]
    assert list(swap["by_model_pair"]) == ["gpt-4 vs llama-13b", "gpt-4 vs vicuna-13b"]
    # the wrapper analysis sees the position design: SWAP against P0, winners unblinded by the file's models
    assert res["conditions_analysed"] == ["P0", "SWAP"] and res["mode"] == "import"
    assert res["disagreement"][0]["comparison"] == "SWAP vs P0" and res["disagreement"][0]["changed"] == 4
    assert res["model_wins"]["by_condition"]["P0"]["wins"]["gpt-4"] == 3
    assert res["design"]["format"] == "fastchat" and res["deviations"] == []
    metrics = get_study("judge").result(res).metrics  # what MLflow logs
    assert metrics["order_swap.first_both"] == 2 and "order_swap.turn.2.flipped_first_rate" in metrics
    plan = json.loads((tmp_path / "fc/plan.json").read_text())
    assert plan["import_format"] == "fastchat" and plan["inputs"]["import"]["fastchat"]["path"] == str(path)
    html = (tmp_path / "fc/report.html").read_text()
    assert 'id="order-swap"' in html and "gpt-4/pair-v2-multi-turn" in html


def test_position_consistency_fairness_and_balanced_win_rates(make_cfg, tmp_path) -> None:
    """LINES in results, metrics and the report: Shi et al.'s measures and each model's win rate
    over both orders beside each single order (closed forms from the six lines)."""
    path = write(tmp_path / "gpt-4_pair.jsonl", LINES)
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="pc"))
    swap = json.loads((tmp_path / "pc/results.json").read_text())["order_swap"]
    # consistent 1; primacy: first_both 2 + (tie, model_2: B shown first won) 1; recency: second_both 1
    assert swap["position_consistency"]["consistent"] == 1 and swap["position_consistency"]["n"] == 5
    assert swap["position_consistency"]["rate"] == pytest.approx(1 / 5)
    pf = swap["preference_fairness"]
    assert (pf["primacy"], pf["recency"], pf["n"]) == (3, 1, 6) and pf["value"] == pytest.approx((1 - 3) / 6)
    assert swap["by_turn"]["2"]["preference_fairness"]["value"] == pytest.approx(-1.0)
    # gpt-4 is model_1 (A) on every valid line: order 1 scores 1, 1, 0, 1/2, 1 (q81 t1, q82, q83,
    # q84, q81 t2) and order 2 scores 1, 0, 1, 0, 0 (a win 1, a TIE 1/2); q85 is invalid
    w = swap["win_rates"]["models"]
    assert (w["gpt-4"]["order_1"], w["gpt-4"]["order_2"]) == (pytest.approx(3.5 / 5), pytest.approx(2 / 5))
    assert w["gpt-4"]["balanced"] == pytest.approx(5.5 / 10)
    assert (w["llama-13b"]["order_1"], w["llama-13b"]["order_2"]) == (
        pytest.approx(1 / 3),
        pytest.approx(1 / 3),
    )
    assert (w["vicuna-13b"]["order_1"], w["vicuna-13b"]["order_2"]) == (0.25, 1.0)
    assert w["gpt-4"]["shown_first_in_order_1"] == 5
    assert swap["win_rates"]["ranking"]["balanced"] == [["vicuna-13b"], ["gpt-4"], ["llama-13b"]]
    assert swap["win_rates"]["ranking"]["order_1"] == [["gpt-4"], ["llama-13b"], ["vicuna-13b"]]
    metrics = get_study("judge").result(json.loads((tmp_path / "pc/results.json").read_text())).metrics
    assert metrics["order_swap.position_consistency"] == pytest.approx(0.2)
    assert metrics["order_swap.preference_fairness"] == pytest.approx(-1 / 3)
    assert metrics["order_swap.win_rate.gpt-4.balanced"] == pytest.approx(0.55)
    html = (tmp_path / "pc/report.html").read_text()
    assert 'id="order-consistency"' in html and 'id="order-win-rates"' in html
    assert "Balanced position calibration" in html


def test_lines_judged_in_one_order_are_read_by_the_randomization_test(make_cfg, tmp_path) -> None:
    """A single-order file (g1_winner or g2_winner alone on each line) gives one row per line and
    order_swap.randomized; a line with both orders beside them is still a pair."""

    def one(qid, field, winner):
        x = line(qid, "alpha", "beta", "tie", "tie")
        x.pop("g2_winner" if field == "g1_winner" else "g1_winner")
        return {**x, field: winner}

    lines = [
        one(1, "g1_winner", "model_1"),  # alpha shown first and won: first
        one(2, "g2_winner", "model_2"),  # beta shown first and won: first
        one(3, "g2_winner", "model_1"),  # beta shown first, alpha won: second
        one(4, "g1_winner", "tie"),
        one(5, "g1_winner", "error"),
        one(6, "g2_winner", "model_2"),  # first
        line(7, "alpha", "beta", "model_1", "model_2"),  # both orders: first_both
    ]
    path = write(tmp_path / "gpt-4_pair.jsonl", lines)
    design, *rows = read_rows(path)
    assert design["lines_in_one_order"] == 6 and len(rows) == 8
    assert [r["condition"] for r in rows[:3]] == ["P0", "SWAP", "SWAP"]
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="one"))
    swap = json.loads((tmp_path / "one/results.json").read_text())["order_swap"]
    r = swap["randomized"]
    assert (r["verdicts"], r["order_1"], r["order_2"], r["ties"], r["invalid"]) == (6, 3, 3, 1, 1)
    assert (r["decisive"], r["first_wins"]) == (4, 3)
    assert r["p_value"] == pytest.approx(stats.binomtest(3, 4).pvalue, rel=1e-12)
    assert swap["counts"]["n"] == 1 and swap["counts"]["first_both"] == 1
    assert swap["unpaired"] == {"order_1_only": 3, "order_2_only": 3}
    html = (tmp_path / "one/report.html").read_text()
    assert 'id="order-randomized"' in html and 'id="order-swap"' in html


def test_a_one_order_file_whose_first_line_shows_model_2_first_is_recognised(make_cfg, tmp_path) -> None:
    """The format is recognised from the first line; in a single-order file that line may hold
    g2_winner alone (model_2 shown first)."""
    lines = [line(q, "alpha", "beta", "tie", w) for q, w in ((1, "model_2"), (2, "model_1"))]
    for x in lines:
        x.pop("g1_winner")
    path = write(tmp_path / "gpt-4_pair.jsonl", lines)
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="g2"))
    res = json.loads((tmp_path / "g2/results.json").read_text())
    assert res["design"]["format"] == "fastchat"
    r = res["order_swap"]["randomized"]
    assert (r["order_1"], r["order_2"], r["decisive"], r["first_wins"]) == (0, 2, 2, 1)


def test_model_answer_files_give_the_lengths_the_prompts_do_not(make_cfg, tmp_path) -> None:
    """study.answers_path: FastChat's model_answer/<model>.jsonl; turn 1 is the first answer, turn
    2 both turns joined; digested into the plan; a bad answer line is refused before the run
    folder exists; the setting is refused for AlpacaEval annotations."""
    answers = tmp_path / "model_answer"
    answers.mkdir()
    texts = {"gpt-4": ["a much longer first answer", "and more"], "llama-13b": ["short", "x"]}
    texts["vicuna-13b"] = ["mid length", "y"]
    for m, turns in texts.items():
        rows = [
            {"question_id": q, "answer_id": "x", "model_id": m, "choices": [{"index": 0, "turns": turns}]}
            for q in (81, 82, 83, 84, 85)
        ]
        (answers / f"{m}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = write(tmp_path / "gpt-4_pair.jsonl", LINES)
    design, *rows = read_rows(path, answers)
    assert design["rows_without_lengths"] == 0
    assert rows[0]["pair"]["lengths"] == {"A": {"chars": 26, "words": 5}, "B": {"chars": 5, "words": 1}}
    turn2 = next(r for r in rows if r["pair"]["turn"] == 2)["pair"]["lengths"]
    assert turn2["A"] == {"chars": 26 + 1 + 8, "words": 7} and turn2["B"]["chars"] == len("mid length\ny")
    cfg = make_cfg(
        "study=judge",
        f"study.import_path={path}",
        f"study.answers_path={answers}",
        "mlflow.enabled=false",
        name="ans",
    )
    run(cfg)
    res = json.loads((tmp_path / "ans/results.json").read_text())
    # gpt-4's answers are the longest: decisive verdicts won by gpt-4 are won by the longer answer
    decisive = [r for r in rows if r["valid"] and r["winner_original"] in ("A", "B")]
    want = sum(r["winner_original"] == "A" for r in decisive)
    got = res["length"]["longer_wins"]["chars"]
    assert (got["decisive_unequal"], got["longer_won"]) == (len(decisive), want)
    plan = json.loads((tmp_path / "ans/plan.json").read_text())
    assert [f["path"] for f in plan["inputs"]["answers"]["files"]] == [
        str(answers / f"{m}.jsonl") for m in sorted(texts)
    ]
    (answers / "llama-13b.jsonl").write_text('{"question_id": 81, "model_id": "llama-13b", "choices": []}\n')
    bad = make_cfg(
        "study=judge",
        f"study.import_path={path}",
        f"study.answers_path={answers}",
        "mlflow.enabled=false",
        name="bad",
    )
    with pytest.raises(InputError, match=r"llama-13b.jsonl: line 1: field 'choices' must hold"):
        run(bad)
    assert not (tmp_path / "bad").exists()
    ae = tmp_path / "a.json"
    ae.write_text(
        json.dumps(
            [
                {
                    "instruction": "i",
                    "output_1": "a",
                    "output_2": "b",
                    "generator_1": "x",
                    "generator_2": "y",
                    "annotator": "j",
                    "preference": 1.0,
                    "is_switched_outputs": False,
                }
            ]
        )
    )
    with pytest.raises(InputError, match=r"study\.answers_path is for a FastChat import"):
        run(
            make_cfg(
                "study=judge",
                f"study.import_path={ae}",
                f"study.answers_path={answers}",
                "mlflow.enabled=false",
                name="ae",
            )
        )


def test_a_forced_format_is_used_and_checked(make_cfg, tmp_path) -> None:
    path = write(tmp_path / "pairs.jsonl", LINES)
    cfg = make_cfg(
        "study=judge",
        f"study.import_path={path}",
        "study.import_format=fastchat",
        "mlflow.enabled=false",
        name="f",
    )
    run(cfg)
    assert json.loads((tmp_path / "f/results.json").read_text())["order_swap"]["counts"]["n"] == 6
    bad = make_cfg(
        "study=judge",
        f"study.import_path={path}",
        "study.import_format=alpaca_eval",
        "mlflow.enabled=false",
        name="g",
    )
    with pytest.raises(InputError, match=r"line 1: missing field\(s\) \['instruction'"):
        run(bad)
    assert not (tmp_path / "g").exists()


def test_bad_input_is_refused_before_anything_is_written(make_cfg, tmp_path) -> None:
    path = write(tmp_path / "gpt-4_pair.jsonl", [*LINES, {**LINES[0], "turn": 0}])
    cfg = make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="bad")
    with pytest.raises(InputError, match=r"gpt-4_pair.jsonl: line 7: field 'turn' must be an integer >= 1"):
        run(cfg)
    assert not (tmp_path / "bad").exists()


def test_an_unrecognised_file_and_both_settings_are_refused(make_cfg, tmp_path) -> None:
    odd = write(tmp_path / "odd.jsonl", [{"id": 1, "verdict": "A"}])
    with pytest.raises(
        InputError, match=r"odd.jsonl: line 1: not a recognised import \(fields \['id', 'verdict'\]\)"
    ):
        run(make_cfg("study=judge", f"study.import_path={odd}", "mlflow.enabled=false", name="odd"))
    both = make_cfg(
        "study=judge",
        f"study.import_path={odd}",
        f"study.import_dir={tmp_path}",
        "mlflow.enabled=false",
        name="both",
    )
    with pytest.raises(InputError, match=r"study\.import_dir and study\.import_path are both set"):
        run(both)


# --- FastChat's own writer --------------------------------------------------------------------

QUALITY = {"m1": 0.9, "m2": 0.8, "m3": 0.7, "m4": 0.55, "m5": 0.8, "m6": None}  # None: unjudgeable


def planted(q_first: float | None, q_second: float | None) -> str:
    """The stub judge's verdict on answers of quality ``q_first`` (shown as A) and ``q_second``:
    no verdict when either is unjudgeable, [[C]] on equal quality, the first shown within 0.15,
    the second shown within 0.25, a tie when the first shown is better by less than 0.35, else
    the better one."""
    if q_first is None or q_second is None:
        return "I cannot tell."
    d = round(q_first - q_second, 6)
    if d == 0:
        return "Equal. [[C]]"
    if abs(d) < 0.15:
        return "[[A]]"
    if abs(d) < 0.25:
        return "[[B]]"
    if 0 < d < 0.35:
        return "[[C]]"
    return "[[A]]" if d > 0 else "[[B]]"


def _winner(verdict: str, first: str, second: str) -> str | None:
    return {"[[A]]": first, "[[B]]": second, "[[C]]": "TIE"}.get(verdict[-5:]) if "[[" in verdict else None


@pytest.fixture
def stub_judge() -> Iterator[str]:
    """An OpenAI-compatible chat server answering :func:`planted` on the answers' qualities."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
            qs = [
                QUALITY[re.search(rf"(?:Assistant {lab}'s Answer\]\n|### Assistant {lab}:\n)(m\d)", user)[1]]
                for lab in "AB"
            ]
            text = planted(qs[0], qs[1])
            message = {"role": "assistant", "content": text}
            data = json.dumps(
                {
                    "id": "stub",
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


WORDS = {"m1": 3, "m2": 9, "m3": 1, "m4": 6, "m5": 6, "m6": 2}  # words after the model's name


def answer(m: str, turn: int) -> str:
    """The answer of model ``m``: its name, then WORDS[m] words (the same length in both turns)."""
    return " ".join([m, *(["word"] * WORDS[m])]) + f" t{turn}"


def _bench(root: Path) -> None:
    """A two-question bench in FastChat's layout, with judge prompts of FastChat's four names."""
    data = root / "data/toy"
    (data / "model_answer").mkdir(parents=True)
    qs = [
        {"question_id": i, "category": "writing", "turns": [f"question {i}", f"follow-up {i}"]}
        for i in (1, 2)
    ]
    (data / "question.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    for m in QUALITY:
        rows = [
            {
                "question_id": i,
                "model_id": m,
                "choices": [{"index": 0, "turns": [answer(m, 1), answer(m, 2)]}],
            }
            for i in (1, 2)
        ]
        (data / f"model_answer/{m}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # FastChat's own layouts (pair-v2 and pair-v2-multi-turn), which hold the answers
    one = (
        "[User Question]\n{question}\n\n[The Start of Assistant A's Answer]\n{answer_a}\n"
        "[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\n{answer_b}\n"
        "[The End of Assistant B's Answer]"
    )
    two = "\n\n\n".join(
        f"<|The Start of Assistant {x}'s Conversation with User|>\n\n### User:\n{{question_1}}\n\n"
        f"### Assistant {x}:\n{{answer_{x.lower()}_1}}\n\n### User:\n{{question_2}}\n\n"
        f"### Assistant {x}:\n{{answer_{x.lower()}_2}}\n\n<|The End of Assistant {x}'s Conversation with User|>"
        for x in "AB"
    )
    base = {"type": "pairwise", "system_prompt": "Judge.", "output_format": "[[A]]"}
    names = ("pair-v2", "pair-math-v1", "pair-v2-multi-turn", "pair-math-v1-multi-turn")
    prompts = [
        {"name": n, "prompt_template": t, **base} for n, t in zip(names, (one, one, two, two), strict=True)
    ]
    (root / "data/judge_prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))


REPO = Path(__file__).resolve().parents[2]
# where scripts/install_judge_tools.sh puts fschat 0.2.36 with openai<1 and anthropic
FASTCHAT_PATH = Path(os.environ.get("LMAUDIT_FASTCHAT_PATH") or REPO / ".tools/fastchat")


@pytest.mark.skipif(
    not FASTCHAT_PATH.is_dir(),
    reason=f"FastChat's llm_judge is not installed in {FASTCHAT_PATH} "
    "(run scripts/install_judge_tools.sh, or set LMAUDIT_FASTCHAT_PATH)",
)
def test_fastchat_own_writer(stub_judge, make_cfg, tmp_path) -> None:
    """FastChat's gen_judgment.py judges every pair of six models in both orders through the
    stub; lmaudit's counts equal those the planted judge implies."""
    root = tmp_path / "fastchat"
    _bench(root)
    # the tool's own directory ahead of lmaudit's environment, in the tool's process only
    env = {
        **os.environ,
        "PYTHONPATH": str(FASTCHAT_PATH),
        "OPENAI_API_BASE": stub_judge,
        "OPENAI_API_KEY": "stub",
    }
    cmd = [
        sys.executable,
        "-m",
        "fastchat.llm_judge.gen_judgment",
        "--bench-name",
        "toy",
        "--judge-model",
        "gpt-4",
    ]
    cmd += ["--mode", "pairwise-all", "--model-list", *QUALITY]
    done = subprocess.run(cmd, cwd=root, env=env, input="\n", capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    path = root / "data/toy/model_judgment/gpt-4_pair.jsonl"
    written = [json.loads(x) for x in path.read_text().splitlines()]
    assert [list(x) for x in written] == [FASTCHAT_FIELDS] * len(written)  # the fields line() writes
    models = list(QUALITY)
    want: Counter = Counter()
    for i, a in enumerate(models):
        for b in models[i + 1 :]:
            o1 = _winner(planted(QUALITY[a], QUALITY[b]), "A", "B")
            o2 = _winner(planted(QUALITY[b], QUALITY[a]), "B", "A")
            want[classify(o1, o2)] += 4  # 2 questions x 2 turns
    want["n"] = 4 * 15
    assert (
        want["first_both"]
        and want["second_both"]
        and want["one_tie"]
        and want["invalid"]
        and want["consistent"]
    )
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="own"))
    res = json.loads((tmp_path / "own/results.json").read_text())
    assert res["order_swap"]["counts"] == {
        k: want[k] for k in ("n", "consistent", "first_both", "second_both", "one_tie", "invalid")
    }
    assert list(res["order_swap"]["by_turn"]) == ["1", "2"]
    assert res["order_swap"]["by_turn"]["1"]["counts"] == res["order_swap"]["by_turn"]["2"]["counts"]
    # Shi et al.'s measures from the planted judge's verdicts, as displayed (A: shown first)
    primacy = recency = 0
    for i, a in enumerate(models):
        for b in models[i + 1 :]:
            o1 = _winner(planted(QUALITY[a], QUALITY[b]), "A", "B")
            o2 = _winner(planted(QUALITY[b], QUALITY[a]), "B", "A")
            if None in (o1, o2) or o1 == o2:
                continue
            primacy += 4 * (o1 == "A" or o2 == "B")
            recency += 4 * (o1 == "B" or o2 == "A")
    pf = res["order_swap"]["preference_fairness"]
    assert (pf["primacy"], pf["recency"]) == (primacy, recency)
    assert pf["value"] == pytest.approx((recency - primacy) / want["n"])
    assert res["order_swap"]["position_consistency"]["rate"] == pytest.approx(
        want["consistent"] / (want["n"] - want["invalid"])
    )
    # length, from the answers FastChat put in its judge prompts: decisive verdicts on answers of
    # unequal length, and those the longer answer won (each pair: 2 questions x 2 turns x 2 orders)
    decisive = longer = 0
    for i, a in enumerate(models):
        for b in models[i + 1 :]:
            for o in (
                _winner(planted(QUALITY[a], QUALITY[b]), "A", "B"),
                _winner(planted(QUALITY[b], QUALITY[a]), "B", "A"),
            ):
                if o in ("A", "B") and WORDS[a] != WORDS[b]:
                    decisive += 4
                    longer += 4 * ((o == "A") == (WORDS[a] > WORDS[b]))
    got = res["length"]["longer_wins"]
    assert (got["chars"]["decisive_unequal"], got["chars"]["longer_won"]) == (decisive, longer)
    assert (got["words"]["decisive_unequal"], got["words"]["longer_won"]) == (decisive, longer)
    assert 0 < longer < decisive


def test_other_imports_and_judged_runs_are_unchanged(make_cfg, tmp_path) -> None:
    """No order_swap outside these imports; a folder given as import_path or import_dir gives the
    same bytes; plans at the default import settings are the plans made before those settings
    existed (the frozen sim registration still verifies)."""
    seed = REPO / "tests/data/judge/seed_001"
    for name, key in (("dir", "import_dir"), ("path", "import_path")):
        run(
            make_cfg(
                "study=judge",
                "judge/condition=wrapper",
                f"study.{key}={seed}",
                "mlflow.enabled=false",
                name=name,
            )
        )
    assert (tmp_path / "dir/results.json").read_bytes() == (tmp_path / "path/results.json").read_bytes()
    assert "order_swap" not in json.loads((tmp_path / "dir/results.json").read_text())
    run(make_cfg("study=judge", "model=sim_judge", "mlflow.enabled=false", name="judged"))
    assert "order_swap" not in json.loads((tmp_path / "judged/results.json").read_text())
    for name in ("dir", "judged"):
        study = json.loads((tmp_path / f"{name}/plan.json").read_text())["config"]["study"]
        assert "import_path" not in study and "import_format" not in study and "import_dir" in study
    run(make_cfg("prereg=judge_sim_attraction_v2", "stage=plan", "mlflow.enabled=false", name="reg"))
