"""The QQ report page of real sim runs: it leads with the answer (or says loudly why the run could
not answer), then the registered predictions, the study's sections, every item as asked and answered
and provenance last; nothing raw, every figure's text on its canvas, and it loads in a browser."""

from __future__ import annotations

import dataclasses
import html as htmllib
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from test_report import make_results

from lmaudit.pipeline import run
from lmaudit.reporting.page import read_rows
from lmaudit.studies.layout import ReportInputs
from lmaudit.studies.qq.report.gates import gate_views
from lmaudit.studies.qq.report.page import render_report
from lmaudit.studies.qq.report.verdict import verdict
from lmaudit.studies.qq.results import QQResults
from svg_checks import texts_off_canvas

SECTIONS = (
    'id="answer"',
    'id="predictions"',
    'id="gates"',
    'id="items"',
    'id="saturation"',
    'id="label-effect"',
    'id="diagnostics"',
    'id="asked"',
    'id="provenance"',
)
ANSWERED = (
    "18 of 18 items satisfy the QQ equality, 0 violate it and 0 are INDETERMINATE (ε = 0.02); "
    "none is certified contextual."
)


def _sim_run(make_cfg: Callable[..., Any], tmp_path: Path, *overrides: str, name: str) -> Path:
    run(make_cfg("model=sim_projective", "mlflow.enabled=false", *overrides, name=name))
    return tmp_path / name


def _load(out: Path) -> dict[str, Any]:
    return {f: json.loads((out / f"{f}.json").read_text()) for f in ("results", "plan", "audit_record")}


def _text(page: str) -> str:
    """The page's visible text, tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _answer(page: str) -> str:
    """The answer box's markup."""
    start = page.index(">", page.index('id="answer"')) + 1
    return page[start : page.index("</section>", start)]


def _svgs(page: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", page, flags=re.S)


def test_the_page_leads_with_the_answer_and_ends_with_provenance(make_cfg, tmp_path) -> None:
    out = _sim_run(make_cfg, tmp_path, name="sim")
    page = (out / "report.html").read_text()
    order = [page.index(s) for s in SECTIONS]
    assert order == sorted(order)
    answer = _answer(page)
    assert 'class="verdict "' in page and ">Answer<" in answer
    assert ANSWERED in _text(answer)
    assert "Gates: G1 PASS (" in _text(answer) and "G3 PASS (4 of 4 spot checks agree)" in _text(answer)
    assert "Saturated: 0 of 18 items (threshold 0.99)." in _text(answer)
    # the glossary explains each term before it is used
    assert page.index("Terms used on this page") < page.index('id="predictions"')
    for term in ("QQ equality", "OSS", "Gamma", "G1", "G2", "G3", "saturated", "envelope"):
        assert f"<dt>{term}</dt>" in page, term
    # a caption under every figure and every table of the study's sections
    body = page[page.index('id="gates"') : page.index('id="asked"')]
    assert body.count('<p class="caption">') >= body.count("<svg") + 6


def test_a_run_that_cannot_answer_says_why_first(make_cfg, tmp_path) -> None:
    out = _sim_run(make_cfg, tmp_path, "+model.params.other_mass=0.05", name="leaky")
    page = (out / "report.html").read_text()
    answer = _text(_answer(page))
    assert answer.startswith(
        "The run could not answer The run cannot say whether the items satisfy the QQ equality. "
        "Gate G2 failed: 0.05 of the mass is off the labels at the worst position (G2 needs < 0.01); "
        "the widest q envelope is 0.1. "
        "Every one of the 18 items is INDETERMINATE (its envelope straddles the margin)."
    )
    assert 'class="verdict unanswered"' in page
    # the failed gate is stated once, in the answer: no alert, fact or section text repeats it
    alerts = [_text(a) for a in re.findall(r'<p class="alert">(.*?)</p>', page, flags=re.S)]
    assert not any("G2" in a for a in alerts)
    assert _text(page).count("G2 failed") == 1 and "G2 FAIL (" not in answer


def test_the_verdict_names_each_reason_and_the_saturation_caveat(make_cfg, tmp_path) -> None:
    out = _sim_run(make_cfg, tmp_path, name="sim")
    res = QQResults.from_json(_load(out)["results"])
    gates = gate_views(res, None)
    gates["G2"] = {**gates["G2"], "median_other": 0.0}
    assert verdict(res, gates).answered and verdict(res, gates).headline == ANSWERED
    failed = {**gates, "G1": {**gates["G1"], "status": "FAIL", "failed": 3}}
    failed["G3"] = {
        **gates["G3"],
        "status": "FAIL",
        "checks": [{**c, "passed": False} for c in gates["G3"]["checks"]],
    }
    v = verdict(res, failed)
    assert not v.answered
    assert (
        f"Gate G1 failed: 3 of {gates['G1']['checked']} rendered contexts split an answer label" in v.headline
    )
    assert "Gate G3 failed: in 4 of 4 spot checks the sampled answers disagree" in v.headline
    assert v.headline.endswith(
        "As measured, 18 of 18 items satisfy the QQ equality, 0 violate it and 0 are INDETERMINATE."
    )
    saturated = dataclasses.replace(res, counts=dataclasses.replace(res.counts, saturated=12))
    s = verdict(saturated, gates)
    assert s.answered and s.headline.endswith(
        "But 12 of 18 items are saturated (near-deterministic answers), so these verdicts say little about "
        "the answer distributions."
    )


def test_each_item_opens_onto_its_exact_prompts_and_measured_answers(make_cfg, tmp_path) -> None:
    out = _sim_run(make_cfg, tmp_path, name="sim")
    page = (out / "report.html").read_text()
    plan = _load(out)["plan"]
    rows = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    samples = re.findall(r'<details class="sample.*?</details>', page, flags=re.S)
    assert len(samples) == 18
    by_id = {re.search(r'<span class="sid">([^<]+)</span>', s).group(1): s for s in samples}  # type: ignore[union-attr]
    for cell in plan["cells"]:
        sample = by_id[cell["item"]]
        for prompt in cell["prompts"]:  # each conversation exactly as asked
            exact = "\n".join(f"[{m['role']}] {m['content']}" for m in prompt)
            assert str(escape(exact)) in sample, cell["item"]
    s101 = by_id["s1-01"]  # the id beside both questions of the item
    summary = _text(s101[: s101.index("</summary>")])
    assert summary.startswith(
        "s1-01 A: Do you generally think Bill Clinton is honest and trustworthy? · "
        "B: Do you generally think Al Gore is honest and trustworthy?"
    )
    assert "SATISFIED · q = " in summary
    for r in rows:  # the label probabilities of every position of the item
        if r.get("kind") == "position" and r["item"] == "s1-01":
            shown = ", ".join(f"P({lab}) = {r['probs'][lab]:.4g}" for lab in sorted(r["label_of"].values()))
            assert shown in _text(s101), (r["mapping"], r["order"], r["position"])


def test_nothing_raw_and_the_same_bytes_from_the_same_records(make_cfg, tmp_path) -> None:
    out = _sim_run(make_cfg, tmp_path, name="sim")
    page = (out / "report.html").read_text()
    text = _text(
        re.sub(r"<svg.*?</svg>|<details><summary>Resolved config.*?</details>", "", page, flags=re.S)
    )
    assert not re.search(r"\b(True|False)\b|\bNone\b(?!: this run is not a registered one)", text)
    assert not re.search(r"\{['\"]|\{&#34;|\[\[", text)  # no dict or nested list printed as such
    assert "Report generated" not in page
    docs = _load(out)
    again = render_report(
        ReportInputs(
            QQResults.from_json(docs["results"]),
            docs["plan"],
            docs["audit_record"],
            read_rows(docs["audit_record"], out),
        )
    )
    assert again == page


def test_every_figure_text_lies_inside_its_viewbox(make_cfg, tmp_path) -> None:
    out = _sim_run(make_cfg, tmp_path, name="sim")
    pages = [(out / "report.html").read_text(), render_report(ReportInputs(make_results()))]
    svgs = [svg for page in pages for svg in _svgs(page)]
    assert len(svgs) == 4  # Figures 1 and 2 of each; the second has labelled far-off items
    for svg in svgs:
        assert texts_off_canvas(svg) == []


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_the_report_loads_in_a_headless_browser(make_cfg, tmp_path) -> None:
    out = _sim_run(make_cfg, tmp_path, name="sim")
    url = (out / "report.html").resolve().as_uri()
    png = tmp_path / "report.png"
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,2400"]
    subprocess.run([*flags, f"--screenshot={png}", url], check=True, capture_output=True, timeout=120)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 1280
    dom = subprocess.run([*flags, "--dump-dom", url], check=True, capture_output=True, text=True, timeout=120)
    assert ANSWERED in _text(dom.stdout)
    assert dom.stdout.index('id="answer"') < dom.stdout.index('id="provenance"')
