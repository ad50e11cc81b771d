"""The judge's typed results: every mode no registered run covers (imports of FastChat and
AlpacaEval files, one condition alone, a combined sweep's design) is written by the pipeline
and read back by :class:`JudgeResults` byte for byte, and a results.json with a field that does
not fit is refused in one line naming the file and the field, before any page is written."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
from judge_helpers import TRICKY, simple_rows
from scipy.stats import binomtest

from lmaudit.console import main as lmaudit_main
from lmaudit.errors import InputError
from lmaudit.pipeline import run
from lmaudit.provenance.digest import canonical_json
from lmaudit.provenance.io import atomic_write_json
from lmaudit.results import FileDigest, Interval
from lmaudit.studies.judge.import_sections import ExactBinomialTest
from lmaudit.studies.judge.length import LengthVerdict, longer_wins
from lmaudit.studies.judge.position import SingleVerdict, randomized
from lmaudit.studies.judge.results import CombinedDesign, JudgeResults
from lmaudit.studies.judge.sections import Endpoints, NotEvaluable, PerLabel, Shift

REPO = Path(__file__).resolve().parents[3]

FASTCHAT_FIELDS = [
    "question_id",
    "model_1",
    "model_2",
    "g1_winner",
    "g2_winner",
    "judge",
    "g1_user_prompt",
    "g1_judgment",
    "g2_user_prompt",
    "g2_judgment",
    "turn",
    "tstamp",
]


def _fastchat_line(qid: int, m1: str, m2: str, g1: str, g2: str, turn: int = 1) -> dict:
    head = [qid, m1, m2, g1, g2, ["gpt-4", "pair-v2" if turn == 1 else "pair-v2-multi-turn"]]
    tail = ["prompt 1", f"judgment 1 of {qid}", "prompt 2", "judgment 2", turn, 1.7e9]
    return dict(zip(FASTCHAT_FIELDS, head + tail, strict=True))


def _annotation(i: int, pref: float | None, switched: bool, ref: str, model: str) -> dict:
    return {
        "instruction": f"task {i}",
        "output_1": ref,
        "generator_1": "ref",
        "output_2": model,
        "generator_2": "model",
        "annotator": "weighted_alpaca_eval_gpt4_turbo",
        "preference": pref,
        "preference_raw_completion": "m",
        "is_switched_outputs": switched,
    }


def _reads_back_byte_for_byte(out: Path) -> JudgeResults:
    """The run's results.json read by JudgeResults and written again by the pipeline's writer."""
    path = out / "results.json"
    typed = JudgeResults.from_json(path.read_text(encoding="utf-8"), str(path))
    again = atomic_write_json(out / "again.json", typed.to_json())
    assert again.read_bytes() == path.read_bytes()
    return typed


def test_a_fastchat_import_reads_back_byte_for_byte(make_cfg, tmp_path) -> None:
    lines = [
        _fastchat_line(81, "alpha", "beta", "model_1", "model_2"),
        _fastchat_line(82, "alpha", "beta", "model_1", "model_1"),
        _fastchat_line(83, "alpha", "gamma", "tie", "model_2", turn=2),
        _fastchat_line(84, "beta", "gamma", "error", "model_1"),
        _fastchat_line(85, "alpha", "gamma", "model_2", "model_1"),
    ]
    path = tmp_path / "gpt-4_pair.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="fc"))
    r = _reads_back_byte_for_byte(tmp_path / "fc")
    assert r.mode == "import" and r.tool_format == "fastchat"
    assert r.order_swap is not None and r.order_swap.win_rates is not None
    assert r.order_swap.counts.n == 5 and r.order_swap.counts.invalid == 1
    assert set(r.order_swap.by_turn) == {"1", "2"}


def test_an_alpaca_eval_import_in_random_order_reads_back_byte_for_byte(make_cfg, tmp_path) -> None:
    anns = [
        _annotation(i, 2.0 if i % 3 else 1.0, bool(i % 2), "r" * (5 + i), "m" * (20 - i)) for i in range(12)
    ]
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(anns, indent=2))
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name="ae"))
    r = _reads_back_byte_for_byte(tmp_path / "ae")
    assert r.tool_format == "alpaca_eval"
    assert r.order_swap is not None and r.order_swap.randomized is not None
    assert r.order_swap.randomized.decisive == 12
    assert r.length is not None and set(r.length.longer_wins) == {"chars", "words"}


def test_one_condition_alone_reads_back_with_what_it_cannot_evaluate(judge_cfg, tmp_path) -> None:
    run(judge_cfg("judge/condition=PA", "study.k=2", name="pa"))
    r = _reads_back_byte_for_byte(tmp_path / "pa")
    assert isinstance(r.patterns, NotEvaluable) and not r.classification.evaluable
    assert r.primary == () and r.repeat is None  # PA alone: the reference P0 was not judged


def test_a_combined_sweeps_design_keeps_its_null_plan_digest(judge_cfg, tmp_path) -> None:
    """A combined sweep's design says ``plan_digest: null`` beside each job's digest: the null
    stays, an import's design (no plan digest at all) stays without one."""
    run(judge_cfg("judge/condition=wrapper", name="w"))
    out = tmp_path / "w"
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    design = rows[0]
    assert design["kind"] == "design" and design["plan_digest"]
    rows[0] = {**design, "plan_digest": None, "job_plan_digests": ["a" * 64, "b" * 64]}
    merged = tmp_path / "merged.jsonl"
    merged.write_text("".join(json.dumps(x) + "\n" for x in rows))
    run(judge_cfg("judge/condition=wrapper", "stage=analyze", f"measurements={merged}", name="both"))
    doc = json.loads((tmp_path / "both/results.json").read_text())
    assert doc["design"]["plan_digest"] is None and doc["design"]["job_plan_digests"] == ["a" * 64, "b" * 64]
    r = _reads_back_byte_for_byte(tmp_path / "both")
    assert isinstance(r.design, CombinedDesign) and r.design.job_plan_digests == ("a" * 64, "b" * 64)
    assert canonical_json(r.to_json()["design"]) == canonical_json(doc["design"])
    single = _reads_back_byte_for_byte(out)
    assert (
        not isinstance(single.design, CombinedDesign) and single.design.plan_digest == design["plan_digest"]
    )


def test_the_readout_shift_intervals_are_the_shared_interval(judge_cfg, tmp_path) -> None:
    planted = ("model.params.wrapper_attraction=10.0", "model.params.noise=0.5", "judge/condition=wrapper")
    run(judge_cfg(*planted, rows=[*TRICKY, *simple_rows(4)], name="ro"))
    r = _reads_back_byte_for_byte(tmp_path / "ro")
    shift = r.readout["PA"].shift_vs_reference
    assert shift is not None
    ci = next(c for c in (shift.ci.A, shift.ci.B, shift.ci.TIE) if c is not None)
    assert isinstance(ci, Interval) and ci.lo <= ci.hi


def _break(out: Path) -> Path:
    """The run's results.json with a string where a count belongs."""
    path = out / "results.json"
    doc = json.loads(path.read_text())
    doc["validity"]["by_condition"]["PA"]["invalid"] = "0"
    path.write_text(json.dumps(doc, indent=2, sort_keys=True))
    return path


def test_a_results_file_with_a_wrong_field_is_refused_in_one_line(judge_cfg, tmp_path, capsys) -> None:
    """``lmaudit compare`` names the file and the field; ``lmaudit report`` names the field and
    writes no page."""
    for name in ("a", "b"):
        run(judge_cfg("judge/condition=wrapper", name=name))
    path = _break(tmp_path / "b")
    assert lmaudit_main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{path}: not a JudgeResults: field 'validity.by_condition.PA.invalid'" in err
    (tmp_path / "b/report.html").unlink()
    assert lmaudit_main(["report", str(tmp_path / "b"), "--conf", str(REPO / "conf")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "field 'validity.by_condition.PA.invalid'" in err, err
    assert not (tmp_path / "b/report.html").exists()


def test_the_results_carry_every_endpoint_the_analysis_computes() -> None:
    path = REPO / "results" / "judge" / "judge_sim_attraction_v2" / "results.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    r = JudgeResults.from_json(doc, str(path))
    assert isinstance(r, Endpoints)
    assert {f.name for f in fields(Endpoints)} <= set(doc)
    assert r.n_prompts == len(r.items) and r.reference in r.conditions_analysed


SHIFT = {
    "mean": {"A": 0.25, "B": -0.125, "TIE": -0.125},
    "ci": {"A": [0.125, 0.375], "B": None, "TIE": [-0.25, 0.0625]},
    "p": {"A": 0.01, "B": None, "TIE": 0.5},
    "n": 4,
    "interval": "student-t",
    "items": {"q1": {"A": 0.5, "B": -0.25, "TIE": -0.25}},
}


def test_a_value_per_label_is_one_record_read_by_label() -> None:
    shift = Shift.from_json(SHIFT, "shift.json")
    assert all(isinstance(x, PerLabel) for x in (shift.mean, shift.ci, shift.p, shift.items["q1"]))
    assert shift.mean["A"] == 0.25 and shift.p["B"] is None
    assert shift.ci["A"] == Interval(0.125, 0.375) and shift.ci["B"] is None
    assert shift.moved() == ["A"]  # TIE's interval holds zero, B has none
    assert canonical_json(shift.to_json()) == canonical_json(SHIFT)
    with pytest.raises(InputError, match=r"^shift\.json: not a Shift: field 'ci\.B'"):
        Shift.from_json({**SHIFT, "ci": {**SHIFT["ci"], "B": "wide"}}, "shift.json")


def test_an_imported_file_is_the_shared_file_digest() -> None:
    files = {"judgments": {"path": "x.jsonl", "sha256": "ab" * 32}}
    design = CombinedDesign.of(
        {"source": "import", "isolation": "unknown", "conditions": [], "files": files}, "d"
    )
    assert design.files is not None and design.files["judgments"] == FileDigest("x.jsonl", "ab" * 32)


def test_first_position_and_longer_answer_wins_are_one_exact_binomial_test() -> None:
    """Both readings are a share of decisive verdicts against 1/2, checked against scipy's
    binomtest (p to 1e-12, the Clopper-Pearson interval to 1e-9)."""
    alpha = 0.05
    # 9 decisive verdicts, 7 for the answer shown first; a tie and an invalid one left out
    single = (
        [SingleVerdict(1, "A", "p")] * 5 + [SingleVerdict(2, "B", "p")] * 2 + [SingleVerdict(1, "B", "p")] * 2
    )
    single += [SingleVerdict(2, "TIE", "p"), SingleVerdict(1, None, "p")]
    # 8 decisive verdicts on unequal lengths, the longer answer won 2; one of equal length
    lengths = [LengthVerdict("A", "m", "n", {"chars": 90}, {"chars": 10})] * 2
    lengths += [LengthVerdict("B", "m", "n", {"chars": 90}, {"chars": 10})] * 6
    lengths += [LengthVerdict("A", "m", "n", {"chars": 5}, {"chars": 5})]
    for got, k, n in ((randomized(single, alpha), 7, 9), (longer_wins(lengths, "chars", alpha), 2, 8)):
        assert isinstance(got, ExactBinomialTest)
        ref = binomtest(k, n, 0.5)
        ci = ref.proportion_ci(1 - alpha, method="exact")
        assert got.rate == pytest.approx(k / n, abs=1e-12)
        assert got.p_value == pytest.approx(ref.pvalue, abs=1e-12)
        assert (got.ci.low, got.ci.high) == pytest.approx((ci.low, ci.high), abs=1e-9)
