"""AlpacaEval annotations imported into the judge study: refused when the shown order is not
recorded (alpaca_eval drops it), read into P0/SWAP rows when each annotation records it, and
the order_swap counts of pairs annotated in both orders.

``test_alpaca_eval_own_annotator`` runs alpaca_eval's own ``PairwiseAnnotator`` (0.6.6) with a
stub completion function in place of an API (``alpaca_eval_annotate.py``), in a subprocess with
``PYTHONPATH`` set to the directory ``scripts/install_judge_tools.sh`` installs alpaca_eval into
(``<repo>/.tools/alpaca_eval``, or ``$LMAUDIT_ALPACA_EVAL_PATH``): its pins conflict with
lmaudit's own dependencies. It is skipped only when that directory is missing. The other tests write annotations as alpaca_eval does
(``DataFrame.to_json(orient="records", indent=2)``: one field a line, null for no preference)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from alpaca_eval_annotate import QUALITY, planted
from scipy import stats

from lmaudit.errors import InputError
from lmaudit.interop.alpaca_eval import read_annotations, read_rows
from lmaudit.pipeline import run
from lmaudit.studies.judge.order_swap import classify
from lmaudit.studies.registry import get_study


def ann(i, g1, o1, g2, o2, pref, switched=None, annotator="weighted_alpaca_eval_gpt4_turbo") -> dict:
    out = {
        "instruction": f"task {i}",
        "output_1": o1,
        "generator_1": g1,
        "output_2": o2,
        "generator_2": g2,
        "annotator": annotator,
        "preference": pref,
        "preference_raw_completion": "m",
    }
    if switched is not None:
        out["is_switched_outputs"] = switched
    return out


def write(path: Path, anns: list[dict]) -> Path:
    path.write_text(json.dumps(anns, indent=2))  # alpaca_eval: one field a line
    return path


PREF = {"ref": 1.0, "model": 2.0, "tie": 1.5, None: None}  # output_1 is ref, output_2 the model


def both_orders(i, won_ref_first, won_model_first) -> list[dict]:
    """Pair i (ref vs model) annotated twice, ref shown first and then the model shown first,
    with the winner of each ("ref", "model", "tie" or None for no preference parsed)."""
    return [
        ann(i, "ref", f"ref {i}", "model", f"model {i}", PREF[won_ref_first], switched=False),
        ann(i, "ref", f"ref {i}", "model", f"model {i}", PREF[won_model_first], switched=True),
    ]


def test_a_stock_annotation_file_is_refused(tmp_path) -> None:
    path = write(
        tmp_path / "annotations.json",
        [ann(0, "ref", "r", "model", "m", 2.0), ann(1, "ref", "r", "model", "n", 1.0)],
    )
    with pytest.raises(InputError) as e:
        read_annotations(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: the order the outputs were shown in is not recorded")
    assert "position bias cannot be audited from this file" in msg and "is_switched_outputs" in msg


def test_refused_through_the_pipeline_before_anything_is_written(make_cfg, tmp_path) -> None:
    path = write(tmp_path / "annotations.json", [ann(0, "ref", "r", "model", "m", 2.0)])
    cfg = make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="stock")
    with pytest.raises(InputError, match="the order the outputs were shown in is not recorded"):
        run(cfg)
    assert not (tmp_path / "stock").exists()


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ({"is_switched_outputs": "yes"}, "line 13: field 'is_switched_outputs' must be true or false"),
        ({"preference": "2"}, "line 13: field 'preference' must be a number or null"),
        ({"generator_2": None}, "line 13: field 'generator_2' must be a string"),
        (
            {"is_switched_outputs": None, "drop": "is_switched_outputs"},
            "line 13: missing field 'is_switched_outputs'",
        ),
        ({"drop": "annotator"}, "line 13: missing field(s) ['annotator']"),
    ],
)
def test_bad_annotations_name_file_line_and_field(tmp_path, bad, said) -> None:
    second = {**ann(1, "ref", "r", "model", "m", 1.0, switched=True), **bad}
    if "drop" in bad:
        second = {k: v for k, v in second.items() if k not in (bad["drop"], "drop")}
    path = write(
        tmp_path / "annotations.json", [ann(0, "ref", "r", "model", "m", 1.0, switched=False), second]
    )
    with pytest.raises(InputError) as e:
        read_annotations(path)
    assert str(e.value).startswith(f"{path}: {said}")


def test_orders_orientation_and_preferences(tmp_path) -> None:
    # sides sort by (generator, output): A = model, B = ref
    anns = [
        ann(
            0, "ref", "r0", "model", "m0", 1.2, switched=False
        ),  # ref (B) shown first: SWAP; output_1 (ref) won
        ann(
            0, "model", "m0", "ref", "r0", 1.7, switched=False
        ),  # model (A) shown first: P0; output_2 (ref) won
        ann(1, "ref", "r1", "model", "m1", 1.5, switched=True),  # output_2 (model, A) shown first: P0; a tie
        ann(1, "ref", "r1", "model", "m1", None, switched=False),  # SWAP; no preference parsed: invalid
        ann(2, "ref", "same", "model", "same", 1.5, switched=False),  # identical outputs: left out
        ann(3, "ref", "r3", "model", "m3", 2.5, switched=False),  # out of range: invalid, one order only
    ]
    design, *rows = read_rows(write(tmp_path / "a.json", anns))
    assert design["identical_outputs_left_out"] == 1 and design["isolation"] == "unknown"
    got = [(r["condition"], r["winner"], r["winner_original"], r["valid"]) for r in rows]
    assert got == [
        ("SWAP", "A", "B", True),  # B won, shown first (displayed as A)
        ("P0", "B", "B", True),
        ("P0", "TIE", "TIE", True),
        ("SWAP", None, None, False),
        ("SWAP", None, None, False),
    ]
    assert rows[0]["item"] == rows[1]["item"] != rows[2]["item"] == rows[3]["item"]
    assert rows[0]["pair"] == {
        "judge_prompt": "weighted_alpaca_eval_gpt4_turbo",
        "models": {"A": "model", "B": "ref"},
        "turn": None,
        "question_id": None,
        "lengths": {"A": {"chars": 2, "words": 1}, "B": {"chars": 2, "words": 1}},  # m0, r0
    }
    assert [r["recorded"]["line"] for r in rows] == [2, 13, 24, 35, 57]  # each annotation's first line
    assert rows[3]["error"].startswith("preference null") and "2.5 is not in [1, 2]" in rows[4]["error"]
    assert rows[0]["raw"] == "m"


def test_one_randomized_order_per_pair_is_read_by_the_randomization_test(make_cfg, tmp_path) -> None:
    """A stock alpaca_eval run (each pair judged once, in its random order) with the order kept:
    accepted, and order_swap.randomized counts the first-position wins among decisive verdicts,
    with the exact binomial test and Clopper-Pearson interval (scipy.stats.binomtest)."""
    # A = model (sorts first), B = ref. switched=False: output_1 (ref, B) shown first
    anns = [
        ann(0, "ref", "r0", "model", "m0", 1.0, switched=False),  # B shown first, output_1 (B) won: first
        ann(1, "ref", "r1", "model", "m1", 2.0, switched=True),  # A shown first, output_2 (A) won: first
        ann(2, "ref", "r2", "model", "m2", 1.0, switched=True),  # A shown first, B won: second
        ann(3, "ref", "r3", "model", "m3", 1.5, switched=False),  # tie: not decisive
        ann(4, "ref", "r4", "model", "m4", None, switched=True),  # invalid
        ann(5, "ref", "r5", "model", "m5", 1.1, switched=False),  # B shown first, won: first
        ann(6, "ref", "r6", "model", "m6", 1.9, switched=False),  # B shown first, A won: second
        ann(7, "ref", "r7", "model", "m7", 1.0, switched=False),  # first
    ]
    path = write(tmp_path / "annotations.json", anns)
    design = read_rows(path)[0]
    assert design["pairs_in_both_orders"] == 0 and design["pairs_in_one_order"] == 8
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="rand"))
    res = json.loads((tmp_path / "rand/results.json").read_text())
    got = res["order_swap"]["randomized"]
    assert (got["verdicts"], got["order_1"], got["order_2"]) == (8, 3, 5)
    assert (got["decisive"], got["first_wins"], got["ties"], got["invalid"]) == (6, 4, 1, 1)
    want = stats.binomtest(4, 6, 0.5)
    ci = want.proportion_ci(confidence_level=0.95, method="exact")
    assert got["p_value"] == pytest.approx(want.pvalue, rel=1e-12)
    assert (got["ci"]["low"], got["ci"]["high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert "drawn at random" in got["assumption"]
    assert res["order_swap"]["counts"]["n"] == 0 and "win_rates" not in res["order_swap"]
    metrics = get_study("judge").result(res).metrics  # what MLflow logs
    assert metrics["order_swap.randomized.first_wins"] == 4 and metrics["order_swap.randomized.decisive"] == 6
    html = (tmp_path / "rand/report.html").read_text()
    assert 'id="order-randomized"' in html and "drawn at random" in html
    # the page's answer is the randomization test, not "the run could not answer"
    assert "the answer shown first won 4 of 6 decisive verdicts (66.7%" in html
    assert "does not separate the judge from one without position bias" in html
    assert "could not answer" not in html


def test_the_pipeline_counts_pairs_annotated_in_both_orders(make_cfg, tmp_path) -> None:
    # A = model (sorts first), B = ref; order 1 (P0) shows the model first
    anns = [
        *both_orders(0, "ref", "model"),  # the first shown won both times: first_both
        *both_orders(1, "model", "ref"),  # the second shown won both times: second_both
        *both_orders(2, "model", "model"),  # consistent
        *both_orders(3, "tie", "model"),  # one_tie
        *both_orders(4, None, "model"),  # invalid
        *both_orders(5, "ref", "model"),  # first_both
        ann(6, "ref", "r6", "model", "m6", 1.0, switched=False),  # ref shown first only: unpaired
    ]
    path = write(tmp_path / "annotations.json", anns)
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="ae"))
    res = json.loads((tmp_path / "ae/results.json").read_text())
    swap = res["order_swap"]
    assert swap["counts"] == {
        "n": 6,
        "consistent": 1,
        "first_both": 2,
        "second_both": 1,
        "one_tie": 1,
        "invalid": 1,
    }
    assert swap["unpaired"] == {"order_1_only": 0, "order_2_only": 1}
    assert list(swap["by_judge_prompt"]) == ["weighted_alpaca_eval_gpt4_turbo"]
    assert list(swap["by_model_pair"]) == ["model vs ref"] and swap["by_turn"] == {}
    assert res["design"]["format"] == "alpaca_eval"
    assert [d["id"] for d in res["deviations"]] == ["isolation_unknown"]


# --- alpaca_eval's own annotator ----------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
# where scripts/install_judge_tools.sh puts alpaca-eval 0.6.6 (openai>=1, setuptools<80)
ALPACA_EVAL_PATH = Path(os.environ.get("LMAUDIT_ALPACA_EVAL_PATH") or REPO / ".tools/alpaca_eval")
ANNOTATE = Path(__file__).with_name("alpaca_eval_annotate.py")


needs_alpaca_eval = pytest.mark.skipif(
    not ALPACA_EVAL_PATH.is_dir(),
    reason=f"alpaca_eval is not installed in {ALPACA_EVAL_PATH} "
    "(run scripts/install_judge_tools.sh, or set LMAUDIT_ALPACA_EVAL_PATH)",
)


@pytest.fixture(scope="module")
def annotated(tmp_path_factory) -> Path:
    """alpaca_eval's own annotator, run once: its annotations.json and shown.json."""
    out = tmp_path_factory.mktemp("alpaca_eval")
    # the tool's own directory ahead of lmaudit's environment, in the tool's process only
    env = {**os.environ, "PYTHONPATH": str(ALPACA_EVAL_PATH)}
    cmd = [sys.executable, str(ANNOTATE), str(out)]
    done = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def _recorded(out: Path) -> list[dict]:
    """The saved annotations with the order the stub judge saw kept as is_switched_outputs."""
    saved = json.loads((out / "annotations.json").read_text())
    shown = json.loads((out / "shown.json").read_text())  # the output the stub judge saw first
    assert len(saved) == len(shown) == 2 * len(QUALITY)
    assert all(first in (a["output_1"], a["output_2"]) for a, first in zip(saved, shown, strict=True))
    return [
        {**a, "is_switched_outputs": first == a["output_2"]} for a, first in zip(saved, shown, strict=True)
    ]


@needs_alpaca_eval
def test_alpaca_eval_own_annotator(annotated, make_cfg, tmp_path) -> None:
    """alpaca_eval annotates each (ref, model) pair twice, the outputs given in both orders; its
    annotations do not record the order shown (refused); with the order the stub judge saw added
    as is_switched_outputs, the counts are those the planted judge implies."""
    with pytest.raises(InputError, match="the order the outputs were shown in is not recorded"):
        read_annotations(annotated / "annotations.json")  # as alpaca_eval saves them
    path = write(tmp_path / "recorded.json", _recorded(annotated))
    want: Counter = Counter(n=len(QUALITY))
    for q in QUALITY.values():  # A = model (sorts first), B = ref
        o1 = {"Output (a)": "A", "Output (b)": "B"}[planted(q, 0.5)]  # model shown first
        o2 = {"Output (a)": "B", "Output (b)": "A"}[planted(0.5, q)]  # ref shown first
        want[classify(o1, o2)] += 1
    assert want["first_both"] and want["consistent"]
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="own"))
    res = json.loads((tmp_path / "own/results.json").read_text())
    keys = ("n", "consistent", "first_both", "second_both", "one_tie", "invalid")
    assert res["order_swap"]["counts"] == {k: want[k] for k in keys}


@needs_alpaca_eval
def test_alpaca_eval_own_randomized_run(annotated, make_cfg, tmp_path) -> None:
    """One alpaca_eval run as it is made by default (each pair once, the order drawn by its
    RandomSwitchTwoColumnsProcessor), the drawn order kept: the randomization test counts the
    first-position wins the planted judge gives in the orders alpaca_eval drew."""
    first_run = _recorded(annotated)[: len(QUALITY)]
    path = write(tmp_path / "one_run.json", first_run)
    want_first = want_decisive = 0
    for a in first_run:
        q_model = QUALITY[a["instruction"]]
        model_first = (a["generator_2"] == "model") == a["is_switched_outputs"]
        verdict = planted(q_model, 0.5) if model_first else planted(0.5, q_model)
        want_decisive += 1
        want_first += verdict == "Output (a)"
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="one"))
    got = json.loads((tmp_path / "one/results.json").read_text())["order_swap"]["randomized"]
    assert (got["decisive"], got["first_wins"]) == (want_decisive, want_first)
    assert got["order_1"] + got["order_2"] == len(QUALITY)
    assert got["p_value"] == pytest.approx(stats.binomtest(want_first, want_decisive).pvalue, rel=1e-12)
