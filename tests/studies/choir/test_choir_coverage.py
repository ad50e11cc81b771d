"""Members without lists in a condition: left out of that condition's agreement, not scored as
an empty ranking (the seed uses "all complete model cells available for each probe").

Closed forms: RBO of two identical lists is 1; of two disjoint lists 0."""

from __future__ import annotations

import numpy as np
import pytest

from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.lists import analyze_lists
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord
from lmaudit.studies.choir.results import QuestionResult

CONCEPTS = [f"concept {i}" for i in range(12)]


def _vectors() -> dict[str, np.ndarray]:
    # orthogonal unit vectors: every text is its own concept (no two within the clustering epsilon)
    eye = np.eye(len(CONCEPTS), dtype=np.float32)
    return {t: eye[i] for i, t in enumerate(CONCEPTS)}


def _rec(model: str, persona: str, items: list[str], g: int = 0) -> ListRecord:
    template = "A" if persona == UNCONDITIONED else f"A/{persona}"
    return ListRecord(model, "Q", template, persona, 0.7, g, tuple(items))


def _settings() -> ChoirStudyConfig:
    s = ChoirStudyConfig()
    s.shuffles = 0
    s.permutations = 0
    return s


def _question(recs: list[ListRecord]) -> QuestionResult:
    return analyze_lists(recs, _vectors(), {}, _settings()).questions["Q"]


@pytest.mark.parametrize("missing_from", ["p1", UNCONDITIONED])
def test_a_member_missing_from_a_condition_is_left_out_of_its_agreement(missing_from: str) -> None:
    same = CONCEPTS[:5]
    recs = [
        _rec(m, cond, same)
        for m in ("m1", "m2", "m3")
        for cond in (UNCONDITIONED, "p1")
        if not (m == "m3" and cond == missing_from)
    ]
    q = _question(recs)
    # the members present agree perfectly: 1, not (1 + 0 + 0) / 3 with an empty ranking for m3
    value = q.R_q if missing_from == UNCONDITIONED else q.same_persona_rbo["p1"]
    assert value == pytest.approx(1.0, abs=1e-12)
    assert q.relative_lift == pytest.approx(1.0, abs=1e-12)
    counts = {UNCONDITIONED: q.n_models_unconditioned, "p1": q.n_models_per_persona["p1"]}
    assert counts[missing_from] == 2 and q.n_models == 3


def test_a_member_present_with_disjoint_lists_still_counts() -> None:
    # m3 answers under p1 with concepts no one else lists: its cell is complete and agrees with
    # no one, so the mean over the three pairs is (1 + 0 + 0) / 3
    recs = [_rec(m, cond, CONCEPTS[:5]) for m in ("m1", "m2", "m3") for cond in (UNCONDITIONED, "p1")]
    recs = [r for r in recs if not (r.model == "m3" and r.persona == "p1")]
    recs.append(_rec("m3", "p1", CONCEPTS[6:11]))
    q = _question(recs)
    assert q.same_persona_rbo["p1"] == pytest.approx(1 / 3, abs=1e-12)
    assert q.n_models_per_persona["p1"] == 3


def test_headline_counts_a_question_without_signal_to_chance_against() -> None:
    s = _settings()
    s.shuffles = 50
    lists = [CONCEPTS[:5], [*CONCEPTS[:4], CONCEPTS[6]], CONCEPTS[1:6]]
    recs = [_rec(m, UNCONDITIONED, items) for m, items in zip(("m1", "m2", "m3"), lists, strict=True)]
    lone = ListRecord("m1", "Q2", "A", UNCONDITIONED, 0.7, 0, tuple(CONCEPTS[:5]))  # one member only
    body = analyze_lists([*recs, lone], _vectors(), {}, s)
    assert body.questions["Q2"].stc is None
    stc = body.questions["Q"].stc
    assert stc is not None
    above = int(stc.above_chance)
    across = body.across_questions
    assert across.n_questions == 2 and across.above_chance == above
    assert across.above_chance_of_all == above / 2  # not above / 1: Q2 has no signal-to-chance: against
    assert across.above_chance_of_all == across.above_chance_share
