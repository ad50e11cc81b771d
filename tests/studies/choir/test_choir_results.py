"""The choir study's typed results: a run without a shuffle null (no signal-to-chance, no
recoverability null band) reads back byte for byte, the cohorts of a ranking question read as
decided or undecided by their shape, and a results.json with a wrong field is refused with one
line naming the file and the field, by ``lmaudit compare`` and by ``lmaudit report``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from choir_quick import QUICK_CHOIR, typed_results
from lmaudit.errors import InputError
from lmaudit.pipeline import run
from lmaudit.pipeline.rebuild import rebuild_report
from lmaudit.studies.choir import views
from lmaudit.studies.choir.results import (
    ChoirResults,
    Cohort,
    CohortDecided,
    Cohorts,
    Contrast,
    ContrastSummary,
)
from lmaudit.studies.choir.results.question import ContrastEnds
from lmaudit.tracking.paired_studies import compare_runs

ROOT = Path(__file__).resolve().parents[3]
SMALL = (
    "study=choir",
    "study.question_ids=[H001,H002]",
    "study.templates=[A]",
    "study.personas=[archivist,promoter]",
    "study.temperatures=[1.0]",
    "study.generations=2",
    "study.items_per_list=8",
    "study.ranking.enabled=false",
    *QUICK_CHOIR,
    "mlflow.enabled=false",
)
MEMBERS = "study.ensemble.members=[{}]".format(
    ", ".join(
        f"{{backend: sim, name: m{i}, agent: freelist, params: {{signature: {i}, signature_strength: 2.0}}}}"
        for i in (1, 2, 3)
    )
)


def _edited(src: Path, dst: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    shutil.copytree(src, dst)
    doc = json.loads((dst / "results.json").read_text())
    edit(doc)
    (dst / "results.json").write_text(json.dumps(doc))
    return dst


def _wrong_count(doc: dict[str, Any]) -> None:
    doc["summary"]["n_questions"] = "2"  # a string where a count belongs


def test_a_run_without_a_null_reads_back_and_a_wrong_field_is_one_line(make_cfg, tmp_path) -> None:
    run(make_cfg(*SMALL, MEMBERS, "study.shuffles=0", "study.n_null=0", name="no_null"))
    ok = tmp_path / "no_null"
    doc = typed_results(ok / "results.json")
    typed = ChoirResults.from_json(doc)
    assert all(v.stc is None for v in typed.questions.values())
    model = typed.recoverability["model"]
    assert model.null_band == (None, None) and model.null_interval is None and model.excess is None
    assert doc["recoverability"]["model"]["null_band"] == [None, None]
    assert views.summary(typed).startswith("choir: 2 questions x 3 models")
    assert typed.headline() == 0.0  # no question has a signal-to-chance: each counts against

    bad = _edited(ok, tmp_path / "bad", _wrong_count)
    with pytest.raises(InputError) as err:
        compare_runs(ok, bad)  # lmaudit compare
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{bad / 'results.json'}: not a ChoirResults: field 'summary.n_questions'")
    before = (bad / "report.html").read_bytes()
    with pytest.raises(InputError) as err:  # lmaudit report: refused before anything is written
        rebuild_report(bad, ROOT / "conf")
    assert "\n" not in str(err.value) and "field 'summary.n_questions'" in str(err.value)
    assert (bad / "report.html").read_bytes() == before

    extra = _edited(ok, tmp_path / "extra", lambda d: d["design"].update(members=3))
    with pytest.raises(InputError, match=r"field 'design.members'"):  # an unknown key
        compare_runs(ok, extra)


def _cohort(**extra: Any) -> dict[str, Any]:
    stage1 = {"n_valid": 0, "n_ballots": 0, "leader": None, "top_family": None, "tie": False}
    return {"stage1": stage1, "stage2": None, "decided_by": None, "advanced_pool": None,
            "advanced_source": None, "tie": False} | extra  # fmt: skip


def test_a_cohort_reads_as_decided_or_undecided_by_its_shape() -> None:
    doc = {
        "conditioned": _cohort(),
        "unconditioned": _cohort(decided_by="stage1", top=None, top_status="tie"),
    }
    cohorts = Cohorts.from_json(doc)
    assert type(cohorts.conditioned) is Cohort and type(cohorts.unconditioned) is CohortDecided
    assert cohorts.to_json() == doc  # an absent top stays absent, a null top stays null


def test_a_contrast_and_its_summary_name_what_they_compare_alike() -> None:
    """Both read the ends of a contrast from ``from`` and ``to`` (``from`` is a Python keyword)."""
    one = {"from": "A", "to": "B", "within_member_rbo": 0.5, "within_member_rbo_per_member": {"m": 0.5}}
    c = Contrast.from_json({**one, "R_q_change": -0.25, "n_cells": 2})
    s = ContrastSummary.from_json(
        {"from": 0.7, "to": 1.0, "n_questions": 3, "within_member_rbo": None, "R_q_change": 0.1, "R_q_up": 2}
    )
    assert isinstance(c, ContrastEnds) and isinstance(s, ContrastEnds)
    assert (c.from_, c.to, s.from_, s.to) == ("A", "B", 0.7, 1.0)
    assert c.to_json()["from"] == "A" and s.to_json()["from"] == 0.7
