"""The judge and choir reports' headlines, checked against the result they were computed from
with the same rules as the studies' tests: a claim ("favours the answer shown first", "agree
beyond chance") only when its exact test says so at the stated alpha (recomputed here with
scipy.stats.binomtest from the result's counts), an import leads with position bias, terms
only where they apply, no wall of ids in a cell, and a section with no data is one line.

Runs: a judge run whose every verdict is invalid; sim judge runs with and without recorded
changes; FastChat pair files in both orders and in one order and AlpacaEval annotations judged
once in a random order and in both orders (the builders the interop tests use, and the files
FastChat's gen_judgment.py and alpaca_eval's annotator write where those tools are installed);
choir runs with no significant question and with one member (nothing to compare)."""

from __future__ import annotations

import html as html_text
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "interop"), str(TESTS / "studies" / "judge")]

from judge_helpers import simple_rows, write_candidates  # noqa: E402
from test_judge_alpaca_eval import _recorded as alpaca_recorded  # noqa: E402
from test_judge_alpaca_eval import (  # noqa: E402
    ann,
    annotated,  # noqa: F401  (fixture: alpaca_eval's own annotations)
    both_orders,
    needs_alpaca_eval,
)
from test_judge_alpaca_eval import write as write_annotations  # noqa: E402
from test_judge_fastchat import (  # noqa: E402
    FASTCHAT_PATH,
    _bench,
    line,
    stub_judge,  # noqa: F401  (fixture: the stub judge FastChat's writer calls)
)
from test_judge_fastchat import QUALITY as FASTCHAT_MODELS  # noqa: E402
from test_judge_fastchat import write as write_lines  # noqa: E402

from choir_quick import QUICK_CHOIR  # noqa: E402
from lmaudit.pipeline import run  # noqa: E402
from lmaudit.studies.choir.report.verdict import facts  # noqa: E402
from lmaudit.studies.choir.results import ChoirResults  # noqa: E402

ALPHA = 0.05
# what only a run lmaudit judged has: the wrappers' conditions and the rubric's format
NATIVE_TERMS = ("P0 / PA / PB / PAB", "WINNER", "CONFIDENCE", "boundary markers", "PAB")


def _read(out: Path) -> tuple[dict[str, Any], str]:
    return json.loads((out / "results.json").read_text()), (out / "report.html").read_text()


def _headline(html: str) -> str:
    (h,) = re.findall(r'<p class="headline">(.*?)</p>', html, flags=re.S)
    return html_text.unescape(h)


def _facts(html: str) -> list[str]:
    block = html[html.index('id="answer"') : html.index("</section>")]
    return [html_text.unescape(f) for f in re.findall(r"<li>(.*?)</li>", block, flags=re.S)]


def _visible(html: str) -> str:
    """The page's text above provenance, without tags (the resolved config is not shown text)."""
    body = html[html.index("<body>") : html.index('id="provenance"')]
    return html_text.unescape(re.sub(r"<[^>]+>", " ", body))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _exact(k: int, n: int) -> tuple[float, str]:
    """p and "[low%, high%]" of the exact two-sided binomial test of 1/2 (Clopper-Pearson)."""
    t = stats.binomtest(k, n, 0.5)
    ci = t.proportion_ci(confidence_level=1 - ALPHA, method="exact")
    return t.pvalue, f"[{_pct(ci.low)}, {_pct(ci.high)}]"


def _empty_sections(html: str) -> dict[str, str]:
    """Each section (by id) whose heading is followed by one line of no data, with the line."""
    return {
        m[0]: html_text.unescape(m[1])
        for m in re.findall(r'<h[23] id="([\w-]+)">[^<]*</h[23]>\s*<p class="empty">(.*?)</p>', html, re.S)
    }


def _import(make_cfg, tmp_path: Path, path: Path, name: str) -> tuple[dict[str, Any], str]:
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name=name))
    return _read(tmp_path / name)


def _annotations(folder: Path, anns: list[dict]) -> Path:
    folder = folder.with_name(folder.name + "-in")
    folder.mkdir(parents=True)
    return write_annotations(folder / "annotations.json", anns)


# --- judge imports --------------------------------------------------------------------------


def check_position_headline(res: dict[str, Any], html: str) -> None:
    """A both-orders import leads with position bias on the flipped pairs, the claim made iff
    the exact sign test rejects at alpha; the changed count follows, in the facts."""
    c = res["order_swap"]["counts"]
    k, n = c["first_both"], c["first_both"] + c["second_both"]
    p, ci = _exact(k, n)
    head = _headline(html)
    assert head.startswith(
        f"The answer shown first wins {_pct(k / n)} {ci} of the {n} pairs whose winner flipped with the order "
        f"({k} of {n}, exact sign test p = "
    )
    favours = "the judge favours the answer shown"
    assert (favours in head) == (p < ALPHA)
    assert ("does not separate the judge from one without position bias" in head) == (p >= ALPHA)
    if p < ALPHA:
        assert head.endswith(f"{favours} {'first' if k > n / 2 else 'second'} (significant at α = 0.05).")
    (d,) = res["disagreement"]
    assert "changed" not in head
    assert _facts(html)[0].startswith(f"{d['changed']} of {d['n']} pairs changed their winner")
    # the position-bias sections come before the count of changes
    assert html.index('id="order-swap"') < html.index('id="disagreement"')


def check_randomized_headline(res: dict[str, Any], html: str) -> None:
    r = res["order_swap"]["randomized"]
    p, ci = _exact(r["first_wins"], r["decisive"])
    head = _headline(html)
    assert head.startswith(
        f"Each pair was judged once, in its recorded order: the answer shown first won {r['first_wins']} of "
        f"{r['decisive']} decisive verdicts ({_pct(r['first_wins'] / r['decisive'])}, exact 95% interval {ci}"
    )
    assert ("The judge favours the answer shown" in head) == (p < ALPHA)
    assert ("does not separate the judge from one without position bias" in head) == (p >= ALPHA)
    assert "could not answer" not in html


def check_import_page(res: dict[str, Any], html: str) -> None:
    """Terms only where they apply; no wall of ids; the zero-changes sentence only with none."""
    shown = _visible(html)
    for native in NATIVE_TERMS:
        assert native not in shown, native
    assert "Terms used on this page" in shown and "order 1 / order 2" in shown
    for cell in re.findall(r'<td class="mono">(.*?)</td>', html, re.S):
        outside = re.sub(r"<details>.*?</details>", "", cell, flags=re.S)
        assert outside.count(",") <= 2, outside[:200]
    changed = sum(d["changed"] for d in res["disagreement"])
    assert "draws no confirmatory inference" not in html
    assert ("Zero recorded changes" in html) == (changed == 0 and bool(res["disagreement"][0]["n"]))
    assert "Aggregate ranking changes" not in html  # orders of different pairs, or both shown per pair


def _position_lines(first_both: int, second_both: int, consistent: int, one_tie: int) -> list[dict]:
    """FastChat lines (both orders each) with the given counts of each kind of pair."""
    kinds = (
        [("model_1", "model_2")] * first_both  # alpha won shown first, beta won shown first
        + [("model_2", "model_1")] * second_both
        + [("model_1", "model_1")] * consistent
        + [("tie", "model_1")] * one_tie
    )
    return [line(100 + i, "alpha", "beta", g1, g2) for i, (g1, g2) in enumerate(kinds)]


@pytest.mark.parametrize(
    ("counts", "significant"),
    [((25, 5, 10, 5), True), ((9, 7, 40, 19), False), ((5, 25, 3, 0), True)],
)
def test_fastchat_both_orders_leads_with_position_bias(make_cfg, tmp_path, counts, significant) -> None:
    path = write_lines(tmp_path / "gpt-4_pair.jsonl", _position_lines(*counts))
    res, html = _import(make_cfg, tmp_path, path, "fc")
    assert res["order_swap"]["counts"]["first_both"] == counts[0]
    check_position_headline(res, html)
    check_import_page(res, html)
    assert (_exact(counts[0], counts[0] + counts[1])[0] < ALPHA) == significant
    # a count and a few ids, the rest folded
    (d,) = res["disagreement"]
    assert f"{d['changed']}: {', '.join(d['changed_prompts'][:3])} …<details>" in html


def test_fastchat_both_orders_without_changes_says_zero_changes_once(make_cfg, tmp_path) -> None:
    path = write_lines(tmp_path / "gpt-4_pair.jsonl", _position_lines(0, 0, 6, 0))
    res, html = _import(make_cfg, tmp_path, path, "same")
    assert res["disagreement"][0]["changed"] == 0
    assert _headline(html).startswith("No pair's winner flipped with the order: of the 6 pairs")
    check_import_page(res, html)


def test_a_fastchat_file_of_errors_cannot_answer_and_renders_no_empty_table(make_cfg, tmp_path) -> None:
    lines = [line(100 + q, "alpha", "beta", "error", "error") for q in range(5)]
    res, html = _import(make_cfg, tmp_path, write_lines(tmp_path / "gpt-4_pair.jsonl", lines), "err")
    v = res["validity"]
    assert v["invalid"] == v["judgments"] == 10
    assert '<section class="verdict unanswered" id="answer">' in html
    assert _headline(html) == (
        "10 of 10 imported verdicts were invalid: the fastchat file records no winner for any of them, "
        "so there is no verdict to compare."
    )
    empty = _empty_sections(html)
    assert set(empty) == {"order-swap", "disagreement", "conditions", "grid", "not-imported", "wins"}
    assert empty["disagreement"].startswith(
        "No pair has a valid verdict in both orders (5 left out as invalid)"
    )
    assert "0/0" not in html and "rubric" not in _visible(html)
    between = html[html.index('id="predictions"') : html.index('id="asked"')]
    assert len(re.findall(r"<table\b", between)) == 1 and between.index("<table") > between.index(
        'id="validity"'
    )


def test_fastchat_one_order_file_is_the_randomization_test(make_cfg, tmp_path) -> None:
    def one(qid: int, field: str, winner: str) -> dict:
        x = line(qid, "alpha", "beta", "tie", "tie")
        x.pop("g2_winner" if field == "g1_winner" else "g1_winner")
        return {**x, field: winner}

    # 18 first-shown wins of 20 decisive verdicts, then 2 ties
    lines = [one(i, "g1_winner", "model_1") for i in range(9)]
    lines += [one(10 + i, "g2_winner", "model_2") for i in range(9)]
    lines += [one(20, "g1_winner", "model_2"), one(21, "g2_winner", "model_1")]
    lines += [one(22, "g1_winner", "tie"), one(23, "g2_winner", "tie")]
    res, html = _import(make_cfg, tmp_path, write_lines(tmp_path / "gpt-4_pair.jsonl", lines), "one")
    assert (res["order_swap"]["randomized"]["first_wins"], res["order_swap"]["randomized"]["decisive"]) == (
        18,
        20,
    )
    check_randomized_headline(res, html)
    assert "The judge favours the answer shown first" in _headline(html)
    check_import_page(res, html)
    assert _empty_sections(html)["disagreement"].startswith("No pair was judged in both orders")


def test_alpaca_eval_randomized_and_both_orders(make_cfg, tmp_path) -> None:
    # the interop test's randomized annotations: 4 first-shown wins of 6 decisive verdicts
    anns = [
        ann(0, "ref", "r0", "model", "m0", 1.0, switched=False),
        ann(1, "ref", "r1", "model", "m1", 2.0, switched=True),
        ann(2, "ref", "r2", "model", "m2", 1.0, switched=True),
        ann(3, "ref", "r3", "model", "m3", 1.5, switched=False),
        ann(4, "ref", "r4", "model", "m4", None, switched=True),
        ann(5, "ref", "r5", "model", "m5", 1.1, switched=False),
        ann(6, "ref", "r6", "model", "m6", 1.9, switched=False),
        ann(7, "ref", "r7", "model", "m7", 1.0, switched=False),
    ]
    res, html = _import(make_cfg, tmp_path, _annotations(tmp_path / "rand", anns), "rand")
    check_randomized_headline(res, html)
    check_import_page(res, html)
    assert "imported verdicts (12.5%) were invalid" in html and "judge outputs" not in html
    # each pair was judged in one order: the other is "not judged", not "invalid"
    assert html.count('<span class="inv">—</span>') == len(anns)
    assert html.count('<span class="inv">invalid</span>') == res["validity"]["invalid"] == 1
    # pairs annotated in both orders: position bias leads
    pairs = [both_orders(i, "ref", "model") for i in range(8)] + [both_orders(8, "model", "ref")]
    both = [a for p in pairs for a in p]
    res, html = _import(make_cfg, tmp_path, _annotations(tmp_path / "both", both), "both")
    check_position_headline(res, html)
    check_import_page(res, html)


@pytest.mark.skipif(
    not FASTCHAT_PATH.is_dir(),
    reason=f"FastChat's llm_judge is not installed in {FASTCHAT_PATH} "
    "(run scripts/install_judge_tools.sh, or set LMAUDIT_FASTCHAT_PATH)",
)
def test_the_file_fastchat_writes(stub_judge, make_cfg, tmp_path) -> None:  # noqa: F811
    root = tmp_path / "fastchat"
    _bench(root)
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
    cmd += ["--mode", "pairwise-all", "--model-list", *FASTCHAT_MODELS]
    done = subprocess.run(cmd, cwd=root, env=env, input="\n", capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    res, html = _import(make_cfg, tmp_path, root / "data/toy/model_judgment/gpt-4_pair.jsonl", "own")
    check_position_headline(res, html)
    check_import_page(res, html)


@needs_alpaca_eval
def test_the_files_alpaca_eval_writes(annotated, make_cfg, tmp_path) -> None:  # noqa: F811
    recorded = alpaca_recorded(annotated)  # each pair annotated in both orders, the order kept
    res, html = _import(make_cfg, tmp_path, _annotations(tmp_path / "b", recorded), "both")
    check_position_headline(res, html)
    check_import_page(res, html)
    one_run = recorded[: len(recorded) // 2]  # one run: each pair once, in alpaca_eval's drawn order
    res, html = _import(make_cfg, tmp_path, _annotations(tmp_path / "o", one_run), "one")
    check_randomized_headline(res, html)
    check_import_page(res, html)


# --- judge runs -------------------------------------------------------------------------------


def test_a_judge_run_with_every_verdict_invalid_renders_no_empty_table(judge_cfg_here, tmp_path) -> None:
    run(
        judge_cfg_here(
            "model.params.invalid_rate=1.0", "judge/condition=wrapper", "study.readout=false", name="inv"
        )
    )
    res, html = _read(tmp_path / "inv")
    v = res["validity"]
    assert v["invalid"] == v["judgments"] > 0 and v["valid"] == 0
    assert '<section class="verdict unanswered" id="answer">' in html
    assert _headline(html) == (
        f"{v['invalid']} of {v['judgments']} judge outputs were invalid: none is in the rubric's WINNER / "
        "CONFIDENCE / REASON format, so there is no verdict to compare."
    )
    empty = _empty_sections(html)
    assert set(empty) == {
        "disagreement",
        "patterns",
        "conditions",
        "grid",
        "classification",
        "confidence",
        "readout",
        "wins",
    }
    assert (
        empty["wins"]
        == empty["conditions"]
        == f"No valid verdict: all {v['judgments']} judge outputs are invalid (see Output validity)."
    )
    assert "Aggregate ranking changes" not in html and "0/0" not in html
    # the one table left says what was invalid
    between = html[
        html.index('id="predictions"') : html.index('id="asked"') if 'id="asked"' in html else None
    ]
    assert re.findall(r"<table\b", between) == ["<table"]
    assert between.index("<table") > between.index('id="validity"')


def test_the_zero_changes_sentence_only_with_zero_changes(judge_cfg_here, tmp_path) -> None:
    """A noiseless null judge changes nothing; a judge drawn to the wrapped answer changes some."""
    for name, params in (("null", "model.params.noise=0"), ("drawn", "model.params.wrapper_attraction=10")):
        run(judge_cfg_here("judge/condition=wrapper", params, "study.readout=false", name=name))
        res, html = _read(tmp_path / name)
        zero = sum(d["changed"] for d in res["disagreement"]) == 0
        assert zero == (name == "null")
        assert ("draws no confirmatory inference from zero" in html) == zero
        assert _headline(html).startswith(
            "No change of presentation changed" if zero else "The presentation changed the judge's verdicts"
        )


@pytest.fixture
def judge_cfg_here(make_cfg, tmp_path):
    """The judge study on the sim judge over five plain prompts, MLflow off."""
    cpath, mpath = write_candidates(tmp_path / "cands", simple_rows(5))

    def _make(*overrides: str, name: str):
        return make_cfg(
            "study=judge",
            "model=sim_judge",
            f"study.candidates_path={cpath}",
            f"study.mapping_path={mpath}",
            "mlflow.enabled=false",
            *overrides,
            name=name,
        )

    return _make


# --- choir ------------------------------------------------------------------------------------

CHOIR = (
    "study=choir",
    "study.question_ids=[H001,H002]",
    "study.templates=[A]",
    "study.personas=[archivist,promoter]",
    "study.temperatures=[1.0]",
    "study.generations=3",
    "study.items_per_list=10",
    *QUICK_CHOIR,
    "mlflow.enabled=false",
)


def _members(n: int) -> str:
    one = "{{backend: sim, name: m{i}, agent: freelist, params: {{signature: {i}, signature_strength: 2.0}}}}"
    return f"study.ensemble.members=[{', '.join(one.format(i=i) for i in range(1, n + 1))}]"


def _choir(make_cfg, tmp_path: Path, members: int, name: str) -> tuple[dict[str, Any], str]:
    run(make_cfg(*CHOIR, _members(members), name=name))
    return _read(tmp_path / name)


def test_choir_claims_beyond_chance_only_where_significant(make_cfg, tmp_path) -> None:
    res, html = _choir(make_cfg, tmp_path, 3, "three")
    qs = res["questions"].values()
    above = sum(1 for q in qs if q["stc"] and q["stc"]["ratio"] > 1)
    sig = sum(1 for q in qs if q["stc"] and q["stc"]["ratio"] > 1 and q["stc"]["p"] < ALPHA)
    assert sig == 0  # the run this test is about: no question significant
    head = _headline(html)
    assert ("agree beyond chance" in head) == (sig > 0)
    assert head.startswith(
        f"No question shows agreement beyond chance at α = 0.05 ({above} of 2 questions with signal-to-chance "
        "above 1, none significant)"
    )
    # template B was never run: nothing is said about it, nor any "0 of 0"
    assert res["summary"]["n_template_novelty"] == 0
    assert "Template B" not in html and "template B" not in html and "0 of 0" not in html
    # ...and is said when it was
    ran = {**res, "summary": {**res["summary"], "n_template_novelty": 2, "novelty_over_half": 1}}
    assert "Template B naming more than 50% concepts template A does not: 1 of 2 questions." in facts(
        ChoirResults.from_json(ran), ALPHA
    )
    # width bins without a question are named, not shown as rows of dashes
    empty_bins = [b for b in res["width_bins"] if not b["n"]]
    assert empty_bins and "Bins with no question: " in html
    assert "<td>— [" not in html and not re.search(r"<tr><td>\[[^<]*</td><td class=\"n\">0</td>", html)


def test_choir_with_nothing_to_compare_says_so_once_per_section(make_cfg, tmp_path) -> None:
    res, html = _choir(make_cfg, tmp_path, 1, "one")
    assert res["summary"]["n_stc"] == 0
    assert _headline(html).startswith("No question has a signal-to-chance")
    empty = _empty_sections(html)
    assert empty["width-bins"].startswith("No question has a width")
    assert empty["echo"].startswith("Nothing to plot")
    assert "0 of 0" not in html and "Template B" not in html
    assert "No unconditioned cell has a cross-member agreement" in html
