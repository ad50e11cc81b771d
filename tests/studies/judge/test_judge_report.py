"""The judge report leads with its answer, built from the run's results: a sim run with a planted
wrapper attraction answers with its disagreement counts; a run whose outputs are all invalid,
or that lacks the reference condition, says it could not answer and why. Then the registered
predictions, the study's sections, every prompt as the judge saw it with the verdicts it wrote,
and provenance last, formatted; every figure's text on its canvas; the page as Chromium renders it."""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from judge_helpers import TRICKY, simple_rows
from markupsafe import escape

from lmaudit.pipeline import run
from lmaudit.provenance.digest import json_digest
from lmaudit.studies.judge.report.verdict import verdict
from lmaudit.studies.judge.results import JudgeResults
from svg_checks import texts_off_canvas

PLANTED = ("model.params.wrapper_attraction=10.0", "model.params.noise=0.5", "judge/condition=wrapper")


def _read(out: Path) -> tuple[dict, dict, list[dict], str]:
    results = json.loads((out / "results.json").read_text())
    plan = json.loads((out / "plan.json").read_text()) if (out / "plan.json").exists() else {}
    m = out / "measurements.jsonl"
    rows = [json.loads(x) for x in m.read_text().splitlines()] if m.exists() else []
    return results, plan, rows, (out / "report.html").read_bytes().decode("utf-8")  # CRs kept


@pytest.fixture
def planted(judge_cfg, tmp_path) -> tuple[dict, dict, list[dict], str]:
    """A sim run (k = 2) with an overwhelming wrapper attraction on the tricky candidates."""
    run(judge_cfg(*PLANTED, "study.k=2", rows=[*TRICKY, *simple_rows(4)], name="planted"))
    return _read(tmp_path / "planted")


def test_the_page_leads_with_the_answer_and_ends_with_provenance(planted) -> None:
    results, _, _, html = planted
    order = [
        html.index(h)
        for h in (
            'id="answer"',
            'id="predictions"',
            'id="disagreement"',
            "Per-prompt condition grid",
            "Confidence distributions",
            'id="asked"',
            'id="provenance"',
        )
    ]
    assert order == sorted(order)
    v = verdict(JudgeResults.from_json(results))
    assert v.answered and str(escape(v.headline)) in html
    assert '<section class="verdict " id="answer">' in html and "The run could not answer" not in html
    # the headline says what changed, in counts taken from the analysis
    assert v.headline.startswith("The presentation changed the judge's verdicts: against P0, ")
    for d in results["disagreement"]:
        if "repeat_pairs" not in d:
            assert f"{d['changed']} of {d['n']} under {d['condition']}" in v.headline
    pat = results["patterns"]
    assert pat["attraction"]["count"] == pat["n_both_decisive"] > 0  # the planted attraction
    assert (
        f"in {pat['attraction']['count']} of the {pat['n_both_decisive']} prompt-replicate pairs"
        in v.headline
    )
    rep = next(d for d in results["disagreement"] if "repeat_pairs" in d)
    assert any(f"changed {rep['changed']} of {rep['n']}" in f for f in v.facts)  # the repeat baseline
    # the terms are explained where they first appear
    for t in (
        "P0 / PA / PB / PAB",
        "disagreement",
        "repeat baseline",
        "attraction / aversion",
        "prompt classes",
    ):
        assert f"<dt>{escape(t)}</dt>" in html


def test_nothing_raw_and_no_clock(planted) -> None:
    _, _, _, html = planted
    page = re.sub(
        r"<details><summary>Resolved config</summary><pre>.*?</pre></details>", "", html, flags=re.S
    )
    assert "True" not in page and "False" not in page
    assert "{&#34;" not in page and "{&#39;" not in page and "[&#39;" not in page  # no dict or list
    assert "Generated" not in page


def test_every_prompt_shows_the_exact_rendered_prompt_and_the_judges_verdicts(planted) -> None:
    results, plan, rows, html = planted
    finals = [r for r in rows if r["kind"] == "judgment" and r["final"]]
    samples = re.findall(
        r'<details class="sample( flag)?"><summary><span class="sid">(.*?)</span>(.*?)</details>', html, re.S
    )
    assert len(samples) == results["n_prompts"] * len(results["conditions_analysed"])
    by_id = {sid: (bool(flag), body) for flag, sid, body in samples}
    p0 = {(r["item"], r["replicate"]): r["winner_original"] for r in finals if r["condition"] == "P0"}
    for cid, packet in plan["packets"].items():
        for it in packet["items"]:
            flagged, body = by_id[f"{escape(it['prompt_id'])} · {cid}"]
            # the prompt shown is byte for byte the one the judge was sent
            (msg,) = it["messages"]
            assert f"<pre>{escape('[user] ' + msg['content'])}</pre>" in body
            mine = [r for r in finals if r["condition"] == cid and r["item"] == it["prompt_id"]]
            assert {r["messages_sha256"] for r in mine} == {json_digest([msg])}
            for r in mine:
                assert str(escape(r["raw"])) in body and f"parsed: {r['winner_original']}" in body
            differs = any(r["winner_original"] != p0[(r["item"], r["replicate"])] for r in mine)
            assert flagged == (cid != "P0" and differs)
    # the questions stand beside their ids, as the judge read them (placeholders not expanded)
    assert str(escape("{response_b} and {rubric} and {0} {")) in html
    assert '<td class="q">Say hi.</td>' in html


def test_every_figure_has_its_text_on_the_canvas(planted) -> None:
    _, _, _, html = planted
    svgs = re.findall(r"<svg\b.*?</svg>", html, re.S)
    assert len(svgs) == 2  # disagreement rates and confidence histograms
    for svg in svgs:
        assert texts_off_canvas(svg) == []


def test_every_output_invalid_without_a_readout_cannot_answer(judge_cfg, tmp_path) -> None:
    n = 15
    run(
        judge_cfg(
            "model.params.invalid_rate=1.0",
            "judge/condition=wrapper",
            "study.readout=false",
            rows=simple_rows(n),
            name="inv",
        )
    )
    results, _, _, html = _read(tmp_path / "inv")
    total = results["validity"]["judgments"]
    assert results["validity"]["invalid"] == total == 4 * n
    v = verdict(JudgeResults.from_json(results))
    assert not v.answered
    assert v.headline.startswith(f"{total} of {total} judge outputs were invalid")
    assert '<section class="verdict unanswered" id="answer">' in html and "The run could not answer" in html
    assert str(escape(v.headline)) in html
    assert f"P0: 0 valid, {n} invalid of {n} judgments (A 0, B 0, TIE 0)." in v.facts
    assert f"{total} of {total} judge outputs (100.0%) were invalid" in html  # the alert
    answers = "".join(re.findall(r"<h4>Answer</h4><pre>(.*?)</pre>", html, re.S))
    assert answers.count("parsed: invalid (") == total  # each verdict says so


def test_every_output_invalid_is_answered_by_the_readout(judge_cfg, tmp_path) -> None:
    """Text verdicts all invalid, the log-prob readout measured: the page's answer is the
    readout's shifts against P0, said as such, with the invalid outputs still shown."""
    n = 6
    run(judge_cfg("model.params.invalid_rate=1.0", "judge/condition=wrapper", rows=simple_rows(n), name="ro"))
    results, _, _, html = _read(tmp_path / "ro")
    total = results["validity"]["judgments"]
    assert results["validity"]["invalid"] == total == 4 * n
    v = verdict(JudgeResults.from_json(results))
    assert v.answered and v.headline.startswith("From the log-prob readout (the text verdicts cannot answer)")
    assert v.facts[0].startswith(f"{total} of {total} judge outputs were invalid")  # why, first
    for cid in ("PA", "PB", "PAB"):
        shift = results["readout"][cid]["shift_vs_reference"]
        assert shift["n"] == n and set(shift["ci"]) == {"A", "B", "TIE"}
        assert any(f.startswith(f"{cid}: mean P(A)") for f in v.facts)
    assert '<section class="verdict " id="answer">' in html and str(escape(v.headline)) in html
    assert f"{total} of {total} judge outputs (100.0%) were invalid" in html  # the alert stays
    answers = "".join(re.findall(r"<h4>Answer</h4><pre>(.*?)</pre>", html, re.S))
    assert answers.count("parsed: invalid (") == total


def test_a_condition_without_a_valid_judgment_cannot_answer(judge_cfg, tmp_path) -> None:
    rows = simple_rows(3)  # no readout: with one, the readout would answer (the test above)
    run(judge_cfg("judge/condition=P0", "study.readout=false", rows=rows, name="p0"))
    run(
        judge_cfg(
            "judge/condition=PA", "model.params.invalid_rate=1.0", "study.readout=false", rows=rows, name="pa"
        )
    )
    merged = tmp_path / "merged.jsonl"
    merged.write_text("".join((tmp_path / f"{c}/measurements.jsonl").read_text() for c in ("p0", "pa")))
    run(
        judge_cfg(
            "judge/condition=wrapper", "stage=analyze", f"measurements={merged}", rows=rows, name="both"
        )
    )
    results, _, _, html = _read(tmp_path / "both")
    assert results["conditions_analysed"] == ["P0", "PA"]
    v = verdict(JudgeResults.from_json(results))
    assert not v.answered
    assert (
        v.headline == "No valid judgment under PA (3 of 3 invalid): its verdicts cannot be compared with P0."
    )
    assert "The run could not answer" in html and str(escape(v.headline)) in html
    assert "P0: 3 valid, 0 invalid of 3 judgments" in html


def test_a_run_without_the_reference_cannot_answer(judge_cfg, tmp_path) -> None:
    run(judge_cfg("judge/condition=PA", rows=simple_rows(3), name="pa"))
    results, _, _, html = _read(tmp_path / "pa")
    v = verdict(JudgeResults.from_json(results))
    assert not v.answered
    assert v.headline.startswith("The reference condition P0 was not judged in this run (judged: PA)")
    assert "The run could not answer" in html and str(escape(v.headline)) in html


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_chromium_renders_the_page_with_its_headline(judge_cfg, tmp_path) -> None:
    run(judge_cfg(*PLANTED, rows=simple_rows(4), name="shown"))
    report = tmp_path / "shown/report.html"
    headline = verdict(JudgeResults.from_json((tmp_path / "shown/results.json").read_text())).headline
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,2400"]
    png = tmp_path / "shown.png"
    subprocess.run(
        ["chromium", *flags, f"--screenshot={png}", report.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    dom = subprocess.run(
        ["chromium", *flags, "--dump-dom", report.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
        text=True,
    ).stdout
    text = htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom)))
    assert headline in text and "The run could not answer" not in text
