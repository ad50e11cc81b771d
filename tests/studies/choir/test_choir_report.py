"""The choir report on the shared page, from sim runs through the whole pipeline: it leads with
the answer (or says why the run could not answer), then the registered predictions, the study's
sections, every list with its exact prompt and answer, and provenance last; nothing raw; every
figure captioned with its text on the canvas; and it renders in a headless browser."""

from __future__ import annotations

import html as html_text
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from choir_quick import QUICK_CHOIR
from lmaudit.pipeline import run
from lmaudit.studies.choir.results import ChoirResults
from svg_checks import texts_off_canvas

SMALL = (
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


def _run(make_cfg: Any, tmp_path: Path, name: str, members: int | None) -> tuple[dict[str, Any], str, Path]:
    """A small sim run: ``members`` sim members, or None for the sim ensemble (four members and
    two evaluators ranking the source-blind candidates)."""
    run(make_cfg(*SMALL, _members(members) if members else "ensemble=sim", name=name))
    out = tmp_path / name
    return json.loads((out / "results.json").read_text()), (out / "report.html").read_text(), out


def _headline(html: str) -> str:
    (h,) = re.findall(r'<p class="headline">(.*?)</p>', html, flags=re.S)
    return str(h)


def test_the_page_leads_with_the_answer_and_ends_with_provenance(make_cfg, tmp_path) -> None:
    res, html, _ = _run(make_cfg, tmp_path, "answered", 3)
    order = [
        html.index(h)
        for h in (
            'id="answer"',
            'id="predictions"',
            "Agreement, width and persona lift",
            'id="recoverability"',
            'id="questions"',
            'id="asked"',
            'id="provenance"',
        )
    ]
    assert order == sorted(order)
    s = res["summary"]
    assert s["n_stc"] == 2  # three members: every question has a signal-to-chance
    head = _headline(html)
    # "beyond chance" only where the test says so at the stated alpha
    if s["above_chance_significant"]:
        assert head.startswith(
            f"The members agree beyond chance on {s['above_chance_significant']} of 2 questions "
            f"(signal-to-chance above 1 and significant at α = 0.05; above 1 on {s['above_chance']})"
        )
    else:
        assert head.startswith(
            f"No question shows agreement beyond chance at α = 0.05 ({s['above_chance']} of 2 questions "
            "with signal-to-chance above 1, none significant)"
        )
    assert f"accuracy {res['recoverability']['model']['accuracy']:.3f}" in head
    assert '<section class="verdict " id="answer">' in html and "The run could not answer" not in html
    # the numbers the report showed before stay on it
    assert f"Above-chance agreement (STC &gt; 1): {s['above_chance']} of 2 questions" in html
    assert (
        f"Persona lift &gt; 1 (same-persona agreement above unconditioned): {s['lift_up']} of {s['n_lift']}"
        in html
    )
    for k, r in res["recoverability"].items():
        assert f"{r['accuracy']:.3f}" in html and f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]" in html, k
    assert "Write a metaphor involving time." in html  # the question's wording beside its id
    assert "Report generated" not in html and "generated 20" not in html  # no clock on the page


def test_every_list_opens_onto_its_exact_prompt_and_answer(make_cfg, tmp_path) -> None:
    res, html, out = _run(make_cfg, tmp_path, "asked", 3)
    plan = json.loads((out / "plan.json").read_text())
    lists = [json.loads(ln) for ln in (out / "measurements.jsonl").read_text().splitlines()]
    lists = [r for r in lists if r["kind"] == "list"]
    assert html.count('<details class="sample') == len(lists) == res["design"]["lists"]
    for meta_persona in ("none", "archivist"):
        (req,) = [
            r
            for r in plan["requests"]
            if r["meta"]["question"] == "H002" and r["meta"]["persona"] == meta_persona
        ]
        prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in req["messages"])
        assert str(escape(prompt)) in html  # the prompt as sent, system turn and worked examples included
        row = next(r for r in lists if r["question"] == "H002" and r["persona"] == meta_persona)
        sid = f"{row['model']} · H002 · {row['condition']} · t=1.0 · g{row['generation']}"
        block = html[html.index(str(escape(sid))) :].split("</details>", 1)[0]
        assert str(escape(prompt)) in block and str(escape(row["raw"])) in block
        assert f"1. {escape(row['items'][0]['text'])}" in block  # the items extracted from it
        assert f"<th>persona</th><td>{meta_persona}</td>" in block and "<th>template</th><td>A</td>" in block


def test_nothing_raw_and_every_figure_captioned_on_its_canvas(make_cfg, tmp_path) -> None:
    from lmaudit.studies.choir.report.page import render_report
    from lmaudit.studies.layout import ReportInputs

    res, html, out = _run(make_cfg, tmp_path, "figures", None)
    page = html.split("<details><summary>Resolved config</summary>")[0]  # the config is JSON, as recorded
    assert "True" not in page and "False" not in page and ">None<" not in page
    for raw in ("{&#34;", "{&quot;", "{&#39;", '{"', "': "):  # no dict printed raw
        assert raw not in page, raw
    svgs = re.findall(r"<svg.*?</svg>", html, flags=re.S)
    assert len(svgs) == 6  # width/lift, width bins, echo, RBO, recoverability, ranking
    for svg in svgs:
        assert texts_off_canvas(svg) == []
    assert len(re.findall(r'</svg>\s*<p class="caption">', html)) == len(svgs)  # each with its caption
    for legend in (
        "shuffle-null 95% band",
        "chance (1 / classes)",
        "STC = 1 (chance)",
        "y = x (no persona effect)",
    ):
        assert legend in html
    plan = json.loads((out / "plan.json").read_text())
    audit = json.loads((out / "audit_record.json").read_text())
    rows = [json.loads(ln) for ln in (out / "measurements.jsonl").read_text().splitlines()]
    typed = ChoirResults.from_json(res)
    again = render_report(ReportInputs(typed, plan, audit, rows))
    assert again == render_report(
        ReportInputs(typed, plan, audit, rows)
    )  # a function of the records: the same bytes


def test_a_run_without_a_signal_to_chance_says_it_could_not_answer(make_cfg, tmp_path) -> None:
    res, html, _ = _run(make_cfg, tmp_path, "alone", 1)  # one member: nothing to compare
    assert res["summary"]["n_stc"] == 0
    assert '<section class="verdict unanswered" id="answer">' in html and "The run could not answer" in html
    assert _headline(html).startswith("No question has a signal-to-chance: each needs unconditioned lists")
    assert html.index("The run could not answer") < html.index('id="predictions"')
    from lmaudit.studies.choir.report.verdict import verdict

    # the other reasons, on the same real results
    d = res["design"]
    refused = {**res, "design": {**d, "refused_lists": {"n": 4, "reasons": {"content_filter": 4}}}}
    v = verdict(ChoirResults.from_json(refused), 0.05)
    assert not v.answered and v.headline.startswith(
        f"The run is incomplete: the server refused 4 of {4 + d['lists']} generations (content_filter: 4)"
    )
    empty = {**res, "design": {**d, "empty_lists": d["lists"]}}
    assert not verdict(ChoirResults.from_json(empty), 0.05).answered
    assert verdict(ChoirResults.from_json(empty), 0.05).headline == (
        f"Every one of the {d['lists']} lists came back empty (no item extracted): there is nothing to compare "
        "across members."
    )


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_the_report_renders_in_a_headless_browser(make_cfg, tmp_path) -> None:
    _, html, out = _run(make_cfg, tmp_path, "browser", None)
    report = (out / "report.html").resolve()
    png = tmp_path / "report.png"
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,2400"]
    subprocess.run(
        [*flags, f"--screenshot={png}", report.as_uri()], check=True, capture_output=True, timeout=120
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    dom = subprocess.run(
        [*flags, "--dump-dom", report.as_uri()], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    headline = html_text.unescape(_headline(html))
    assert headline.startswith(
        ("The members agree beyond chance on", "No question shows agreement beyond chance")
    )
    assert headline in dom and "What was asked and answered" in dom
