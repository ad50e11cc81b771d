"""The draws report renders from results alone (no plan, no audit) and escapes every name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from draws_helpers import FAST, family

from lmaudit.studies.draws.analysis import analyze_records
from lmaudit.studies.draws.importer import SequenceRecord
from lmaudit.studies.draws.report.page import render_report
from lmaudit.studies.draws.results import DrawsResults
from lmaudit.studies.layout import ReportInputs


def _results() -> DrawsResults:
    rng = np.random.default_rng(1)
    recs = [
        SequenceRecord("<b>fam</b>", "src&1", "c", f"p{i}", tuple(s), None)
        for i, s in enumerate(family(rng, 15, 10, 0.2))
    ]
    recs += [
        SequenceRecord("<b>fam</b>", "rebuilt", "c", f"q{i}", tuple(sorted(s)), None)
        for i, s in enumerate(family(rng, 10, 10, 0.0))
    ]
    return analyze_records(recs, FAST, exclude_patterns=["pred-*"])


def test_report_renders_without_plan_or_audit(tmp_path: Path) -> None:
    res = _results()
    html = render_report(ReportInputs(res))
    assert html.count("<svg") == 2  # the null distribution and the rho_upper curve
    assert "&lt;b&gt;fam&lt;/b&gt;" in html and "<b>fam</b>" not in html and "src&amp;1" in html
    assert "Without flagged sources" in html  # the rebuilt source is flagged
    assert "not recorded" in html


def test_report_survives_results_without_a_family() -> None:
    empty = analyze_records([], FAST, exclude_patterns=["pred-*"])
    assert empty.families == {} and empty.n_families == 0
    html = render_report(ReportInputs(empty))
    assert "The run could not answer" in html and "the run holds no sequences" in html
    assert "None: this run is not a registered one" in html


def test_the_page_leads_with_the_answer_and_ends_with_provenance() -> None:
    res = _results()
    rows = [
        {
            "kind": "sequence",
            "family": "m",
            "source": "s",
            "condition": "c",
            "probe": "colour",
            "replicate": 0,
            "seed": 7,
            "draws": ["red", "red", "blue"],
        },
    ]
    plan = {
        "requests": [
            {
                "messages": [{"role": "user", "content": "Name a <colour>."}],
                "meta": {"condition": "c", "probe": "colour", "replicate": 0},
            }
        ]
    }
    html = render_report(ReportInputs(res, plan, rows=rows))
    order = [
        html.index(h)
        for h in (
            'id="answer"',
            'id="predictions"',
            "The persistence test, per family",
            'id="asked"',
            'id="provenance"',
        )
    ]
    assert order == sorted(order)
    assert "Answers persist from draw to draw in 1 of 1 family" in html  # the planted persistence
    assert "[user] Name a &lt;colour&gt;." in html and "red → red → blue" in html
    assert "True" not in html and "False" not in html and "{&#34;" not in html  # nothing raw
