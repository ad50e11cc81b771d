"""The draws report renders from results alone (no plan, no audit) and escapes every name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from draws_helpers import FAST, family

from lmaudit.studies.draws.importer import SequenceRecord
from lmaudit.studies.draws.report import render_report
from lmaudit.studies.draws.results import analyze_records


def _results() -> dict:
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
    html = render_report(results=res, plan=None, audit=None)
    assert html.count("<svg") == 2  # the null distribution and the rho_upper curve
    assert "&lt;b&gt;fam&lt;/b&gt;" in html and "<b>fam</b>" not in html and "src&amp;1" in html
    assert "Without flagged sources" in html  # the rebuilt source is flagged
    assert "not recorded" in html


def test_report_survives_an_empty_results_dict() -> None:
    html = render_report(results={}, plan=None, audit=None)
    assert "lmaudit draws: 0 families" in html and "No predictions registered" in html
