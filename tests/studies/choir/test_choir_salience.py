"""Exact salience ties reach RBO as tie groups, and the salience table and codebook are
recorded per question (closed forms on orthogonal concepts)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.lists import analyze_lists
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord
from lmaudit.studies.choir.results.question import SalienceTies
from lmaudit.studies.choir.salience_table import salience_view

CONCEPTS = [f"concept {i}" for i in range(10)]


def _vectors() -> dict[str, np.ndarray]:
    eye = np.eye(len(CONCEPTS), dtype=np.float32)  # every text its own concept
    return {t: eye[i] for i, t in enumerate(CONCEPTS)}


def _rec(model: str, items: list[str], g: int) -> ListRecord:
    return ListRecord(model, "Q", "A", UNCONDITIONED, 0.7, g, tuple(items))


def _settings(shuffles: int = 0) -> ChoirStudyConfig:
    s = ChoirStudyConfig()
    s.shuffles = shuffles
    s.permutations = 0
    return s


def test_members_with_equal_salience_agree_fully() -> None:
    # both members name the same two lists, in the opposite order: every concept's S is the
    # same for both (c_i and c_{i+5} tie at (5 - i)/10), so their salience rankings are equal
    # and R_q = 1; ordering the ties by the list seen first would give R_q < 1
    first, second = CONCEPTS[:5], CONCEPTS[5:]
    recs = [_rec("m1", first, 0), _rec("m1", second, 1), _rec("m2", second, 0), _rec("m2", first, 1)]
    q = analyze_lists(recs, _vectors(), {}, _settings(shuffles=50)).questions["Q"]
    assert q.R_q == pytest.approx(1.0, abs=1e-12)
    assert q.stc is not None and q.stc.observed == pytest.approx(1.0, abs=1e-12)
    # the alternative reading (ties ordered by the concept seen first) is recorded beside it:
    # m1 ranks c0 c5 c1 c6 ..., m2 c5 c0 c6 c1 ...: A_d = 0, 1, 2/3, 1, 4/5, ... (odd d: (d-1)/d)
    want = sum(0.1 * 0.9 ** (d - 1) * ((d - 1) / d if d % 2 else 1.0) for d in range(1, 11)) + 0.9**10
    assert q.salience_ties == SalienceTies(tied_share=1.0, R_q_tie_rule=pytest.approx(want, abs=1e-12))


def test_salience_table_and_codebook_are_recorded() -> None:
    recs = [
        _rec("m1", CONCEPTS[:3], 0),
        _rec("m1", [CONCEPTS[1], CONCEPTS[0]], 1),
        _rec("m2", [CONCEPTS[2]], 0),
        ListRecord("m2", "Q", "A/p1", "p1", 0.7, 0, (CONCEPTS[3], CONCEPTS[3])),
    ]
    q = analyze_lists(recs, _vectors(), {}, _settings()).questions["Q"]
    rec = json.loads(json.dumps(q.salience.to_json()))  # JSON as written
    groups = [(g["model"], g["condition"], g["n_lists"]) for g in rec["groups"]]
    assert groups == [("m1", UNCONDITIONED, 2), ("m2", UNCONDITIONED, 1), ("m2", "p1", 1)]
    assert rec["columns"] == ["concept", "group", "s", "lists"]
    label = {c["concept"]: c["label"] for c in rec["codebook"]}
    table = {(label[c], g): (s, k) for c, g, s, k in rec["rows"]}
    # m1: S_0 = (1 + 1/2) / 2 = 3/4 (2 lists), S_1 = (2/3 + 1) / 2 = 5/6 (2), S_2 = (1/3) / 2 = 1/6 (1)
    assert table[(CONCEPTS[0], 0)] == (pytest.approx(3 / 4, abs=1e-15), 2)
    assert table[(CONCEPTS[1], 0)] == (pytest.approx(5 / 6, abs=1e-15), 2)
    assert table[(CONCEPTS[2], 0)] == (pytest.approx(1 / 6, abs=1e-15), 1)
    assert table[(CONCEPTS[2], 1)] == (1.0, 1) and table[(CONCEPTS[3], 2)] == (1.0, 1)
    assert len(rec["rows"]) == 5
    # each group's rows most salient first
    assert [label[c] for c, g, _, _ in rec["rows"] if g == 0] == [CONCEPTS[1], CONCEPTS[0], CONCEPTS[2]]
    # the codebook: every concept's phrases with occurrence counts (a repeat in a list counts)
    phrases = {c["label"]: c["phrases"] for c in rec["codebook"]}
    assert phrases[CONCEPTS[0]] == {CONCEPTS[0]: 2} and phrases[CONCEPTS[3]] == {CONCEPTS[3]: 2}
    view = salience_view({"Q": q})
    assert [t["condition"] for t in view[0]["tables"]] == ["unconditioned", "persona p1"]
    # rows by mean S over the members: concept 2 (1/6 + 1) / 2 before concept 1 (5/6 + 0) / 2
    assert view[0]["tables"][0]["rows"][:2] == [
        [CONCEPTS[2], "0.167 (1/2)", "1.000 (1/1)"],
        [CONCEPTS[1], "0.833 (2/2)", "—"],
    ]
