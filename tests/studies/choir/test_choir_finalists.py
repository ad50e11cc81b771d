"""The finalist stage of the source-blind ranking (appendix D) by hand: finalist selection,
stage-2 Borda, the advanced pool and top finalist, ties counted against the claims, one-round
ballots decided by stage 1, set answers and prompts, finalists per cohort or pooled, and stage-2
ballots imported from JSONL (the sim ranker's planted finalist preference: test_choir_ranking.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lmaudit.errors import InputError
from lmaudit.studies.choir.ballots import parse_ranking, read_ballots, render_sets_prompt
from lmaudit.studies.choir.borda import analyze_ranking
from lmaudit.studies.choir.finalists import select_finalists
from lmaudit.studies.choir.pools import source_of
from lmaudit.studies.choir.results import CohortDecided, Ranking
from lmaudit.studies.choir.tally import borda

BALLOT = {
    "question": "H001",
    "cohort": "conditioned",
    "evaluator": "e1",
    "persona": "archivist",
    "candidates": [
        {"label": "A", "text": "x", "pool": "conditioned_rare"},
        {"label": "B", "text": "y", "source": "unconditioned"},
    ],
    "ranking": ["B", "A"],
}

# --- the finalist stage by hand ---------------------------------------------------------------

POOL = {
    "cc": "conditioned_consensus",
    "cr": "conditioned_rare",
    "uc": "unconditioned_consensus",
    "ur": "unconditioned_rare",
}
# cc-1 and uc-1 are one concept family (F1) under two wordings
CANDS = {"cc-1": "F1", "cc-2": "F2", "cr-1": "F3", "uc-1": "F1", "ur-1": "F4"}


def _cand(cid: str) -> dict[str, str]:
    pool = POOL[cid.split("-")[0]]
    return {"id": cid, "text": f"text {cid}", "pool": pool, "source": source_of(pool), "family": CANDS[cid]}


def _stage1(cohort: str, ranking: list[str], k: int) -> dict[str, Any]:
    labels = [chr(ord("A") + i) for i in range(len(CANDS))]
    shown = [{"label": lab, **_cand(c)} for lab, c in zip(labels, sorted(CANDS), strict=True)]
    by_id = {c["id"]: c["label"] for c in shown}
    return {
        "kind": "ballot",
        "stage": 1,
        "question": "q1",
        "cohort": cohort,
        "evaluator": f"e{k}",
        "candidates": shown,
        "raw": " > ".join(by_id[c] for c in ranking),
    }


SETS = {"A": ["cc-1", "cc-2"], "B": ["cr-1"], "C": ["uc-1"], "D": ["ur-1"]}


def _stage2(cohort: str, ranking: str, k: int) -> dict[str, Any]:
    sets = [
        {
            "label": lab,
            "pool": POOL[ids[0].split("-")[0]],
            "source": source_of(POOL[ids[0].split("-")[0]]),
            "finalists": [{key: _cand(c)[key] for key in ("id", "text", "family")} for c in ids],
        }
        for lab, ids in SETS.items()
    ]
    return {
        "kind": "ballot",
        "stage": 2,
        "question": "q1",
        "cohort": cohort,
        "evaluator": f"e{k}",
        "candidates": sets,
        "raw": ranking,
    }


def _decided(out: Ranking, cohort: str) -> CohortDecided:
    """Question q1's outcome for ``cohort``, a cohort that decided."""
    cohorts = out.questions["q1"].cohorts
    assert cohorts is not None
    o = cohorts[cohort]
    assert isinstance(o, CohortDecided)
    return o


def test_stage2_borda_advanced_pool_top_finalist_and_ties_by_hand() -> None:
    # stage 1, conditioned cohort (5 candidates, 4 families: 3, 2, 1, 0 with collapse):
    #   [cc-1, uc-1, cr-1, cc-2, ur-1]: F1 3 (cc-1), uc-1 passed over, F3 2 (cr-1), F2 1 (cc-2), F4 0
    #   [cr-1, cc-2, cc-1, ur-1, uc-1]: F3 3 (cr-1), F2 2 (cc-2), F1 1 (cc-1), F4 0, uc-1 passed over
    #   credited: cr-1 5, cc-1 4, cc-2 3, ur-1 0, uc-1 0
    # stage 2, conditioned cohort (4 sets: 3, 2, 1, 0):
    #   A > B > C > D, B > A > D > C, A > C > B > D: A 8, B 6, C 3, D 1 -> A (conditioned consensus);
    #   its finalists cc-1 (4) and cc-2 (3): the top candidate is cc-1
    # stage 1, unconditioned cohort: [uc-1, cc-1, ur-1, cr-1, cc-2]: uc-1 3, ur-1 2, cr-1 1, cc-2 0
    # stage 2, unconditioned cohort: Set C > Set A > Set B > Set D, 1. A 2. C 3. D 4. B:
    #   C 5, A 5, B 1, D 1 -> a tie for the advanced pool: no advanced pool, no top candidate
    ballots = [
        _stage1("conditioned", ["cc-1", "uc-1", "cr-1", "cc-2", "ur-1"], 1),
        _stage1("conditioned", ["cr-1", "cc-2", "cc-1", "ur-1", "uc-1"], 2),
        _stage2("conditioned", "A > B > C > D", 1),
        _stage2("conditioned", "B > A > D > C", 2),
        _stage2("conditioned", "Ranking: Set A, Set C, Set B, Set D", 3),
        _stage1("unconditioned", ["uc-1", "cc-1", "ur-1", "cr-1", "cc-2"], 1),
        _stage2("unconditioned", "Set C > Set A > Set B > Set D", 1),
        _stage2("unconditioned", "1. Set A\n2. Set C\n3. Set D\n4. Set B", 2),
    ]
    out = analyze_ranking(ballots, [], "hand")
    assert out is not None
    con = _decided(out, "conditioned")
    assert con.stage2 is not None and con.stage2.set_points == {
        "conditioned_consensus": 8,
        "conditioned_rare": 6,
        "unconditioned_consensus": 3,
        "unconditioned_rare": 1,
    }
    assert {r.id: r.points for r in con.stage1.borda or ()} == {
        "cr-1": 5,
        "cc-1": 4,
        "cc-2": 3,
        "ur-1": 0,
        "uc-1": 0,
    }
    assert (con.decided_by, con.advanced_pool, con.tie) == (
        "finalists",
        "conditioned_consensus",
        False,
    )
    assert con.top is not None and (con.top.id, con.top_status) == ("cc-1", "ok")
    # the stage-1 leader (cr-1, conditioned rare) is not what the finalist stage advanced
    assert con.stage1.leader is not None and con.stage1.leader.id == "cr-1"
    unc = _decided(out, "unconditioned")
    assert unc.stage2 is not None and unc.stage2.set_points["unconditioned_consensus"] == 5
    assert (unc.advanced_pool, unc.advanced_source, unc.tie) == (None, None, True)
    assert unc.tied_pools == ("conditioned_consensus", "unconditioned_consensus")
    assert (unc.top, unc.top_status) == (None, "advanced pool tied")
    s = out.summary
    assert s.conditioned_cohort.to_json() == {
        "count": 1,
        "n": 1,
        "share": 1.0,
        "ties": 0,
        "decided_by": {"finalists": 1},
    }
    # the tie counts against both claims: not conditioned-advanced, not agreement
    assert (
        s.unconditioned_cohort.count,
        s.unconditioned_cohort.n,
        s.unconditioned_cohort.ties,
    ) == (
        0,
        1,
        1,
    )
    assert s.agree_top.to_json() == {"count": 0, "n": 1, "share": 0.0, "ties": 1}
    # a tie for the top finalist: three more conditioned stage-1 ballots level cc-1 and cc-2
    #   [ur-1, cc-2, cr-1, cc-1, uc-1]: ur-1 3, cc-2 2, cr-1 1, cc-1 0 (twice): cc-2 +4
    #   [cc-1, ur-1, cr-1, cc-2, uc-1]: cc-1 3, ur-1 2, cr-1 1, cc-2 0: cc-1 +3
    #   cc-1 4 + 3 = 7, cc-2 3 + 4 = 7
    extra = [
        _stage1("conditioned", ["ur-1", "cc-2", "cr-1", "cc-1", "uc-1"], 3),
        _stage1("conditioned", ["cc-1", "ur-1", "cr-1", "cc-2", "uc-1"], 4),
        _stage1("conditioned", ["ur-1", "cc-2", "cr-1", "cc-1", "uc-1"], 5),
    ]
    out = analyze_ranking([*ballots, *extra], [], "hand")
    assert out is not None
    con = _decided(out, "conditioned")
    pts = {r.id: r.points for r in con.stage1.borda or ()}
    assert (pts["cc-1"], pts["cc-2"]) == (7, 7)
    assert (con.advanced_pool, con.top, con.top_status) == ("conditioned_consensus", None, "tie")
    assert out.summary.conditioned_cohort.count == 1  # the pool is advanced; its top is tied


def test_finalists_are_each_pools_best_distinct_families_by_hand() -> None:
    # conditioned consensus holds x1, x2 (one family, G) and x3 (H); conditioned rare y1, y2
    info = {
        "x1": {"pool": "conditioned_consensus", "family": "G"},
        "x2": {"pool": "conditioned_consensus", "family": "G"},
        "x3": {"pool": "conditioned_consensus", "family": "H"},
        "y1": {"pool": "conditioned_rare", "family": "J"},
        "y2": {"pool": "conditioned_rare", "family": "K"},
    }
    family = {c: str(v["family"]) for c, v in info.items()}
    # [x2, y1, x1, x3, y2]: G 3 (x2), J 2 (y1), x1 passed over, H 1 (x3), K 0 (y2)
    # [x1, y2, x3, y1, x2]: G 3 (x1), K 2 (y2), H 1 (x3), J 0 (y1), x2 passed over
    # credited: x1 3, x2 3, x3 2, y1 2, y2 2 (first places: x1 1, x2 1)
    b = borda([["x2", "y1", "x1", "x3", "y2"], ["x1", "y2", "x3", "y1", "x2"]], family)
    one = select_finalists(b, info, 1)
    # x1 and x2 (one family) tie on points and first places: the id picks x1 to carry G, and x2
    # is passed over as G's; y1 and y2 tie at the cut (the id decides, the tie is recorded)
    assert one["finalists"] == {"conditioned_consensus": ["x1"], "conditioned_rare": ["y1"]}
    assert one["cut_ties"] == ["conditioned_rare"]
    # two per pool: x2 shares x1's family, so x3 is the second consensus finalist
    two = select_finalists(b, info, 2)
    assert two["finalists"] == {"conditioned_consensus": ["x1", "x3"], "conditioned_rare": ["y1", "y2"]}
    assert two["cut_ties"] == []


def test_one_round_ballots_are_decided_by_stage_1_and_a_tie_counts_against() -> None:
    # no stage-2 ballots: the stage-1 Borda decides. Unconditioned cohort (4 families: 3, 2, 1, 0):
    #   [cc-1, cr-1, ur-1, cc-2, uc-1]: F1 3, F3 2, F4 1, F2 0 (uc-1 passed over)
    #   [cr-1, cc-1, cc-2, ur-1, uc-1]: F3 3, F1 2, F2 1, F4 0
    #   F1 5 and F3 5: a tie for the most points (first places 1 and 1)
    ballots = [
        _stage1("unconditioned", ["cc-1", "cr-1", "ur-1", "cc-2", "uc-1"], 1),
        _stage1("unconditioned", ["cr-1", "cc-1", "cc-2", "ur-1", "uc-1"], 2),
        _stage1("conditioned", ["cr-1", "cc-1", "cc-2", "ur-1", "uc-1"], 1),
    ]
    out = analyze_ranking(ballots, [], "one round")
    assert out is not None
    unc = _decided(out, "unconditioned")
    assert unc.stage1.tie and unc.decided_by == "stage1"
    assert (unc.advanced_pool, unc.top, unc.top_status) == (None, None, "tie")
    con = _decided(out, "conditioned")
    assert con.top is not None and (con.decided_by, con.advanced_pool, con.top.id) == (
        "stage1",
        "conditioned_rare",
        "cr-1",
    )
    s = out.summary
    assert (s.unconditioned_cohort.count, s.unconditioned_cohort.n) == (0, 1)
    assert s.agree_top.to_json() == {"count": 0, "n": 1, "share": 0.0, "ties": 1}


@pytest.mark.parametrize(
    "raw",
    ["Set C > Set A > Set B", "**set c > set a > set b**", "1. Set C\n2. Set A\n3. Set B", "C > A > B"],
)
def test_set_answers_are_read(raw: str) -> None:
    p = parse_ranking(raw, ["A", "B", "C"], noun="set")
    assert p.valid and p.ranking == ["C", "A", "B"], p


def test_the_sets_prompt_hides_sources() -> None:
    text = render_sets_prompt(None, "Why?", [["one", "two"], ["three"]])
    assert "Set A:\n- one\n- two\n\nSet B:\n- three" in text and "B > A" in text
    assert "conditioned" not in text and "pool" not in text


SET_BALLOT = {
    "question": "H001",
    "stage": 2,
    "cohort": "unconditioned",
    "evaluator": "e1",
    "candidates": [
        {"label": "A", "pool": "conditioned_rare", "finalists": ["x", {"text": "y", "family": "f"}]},
        {"label": "B", "source": "unconditioned", "finalists": ["z"]},
    ],
    "raw": "Set B > Set A",
}


def test_stage_2_ballots_are_imported(tmp_path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps(SET_BALLOT) + "\n" + json.dumps({**BALLOT, "stage": 1}) + "\n")
    rows = read_ballots(path)
    assert [r["stage"] for r in rows] == [2, 1]
    assert rows[0]["candidates"][0]["finalists"] == [
        {"id": "x", "text": "x", "family": "x"},
        {"id": "y", "text": "y", "family": "f"},
    ]
    assert rows[0]["candidates"][1]["pool"] == "unconditioned_unspecified"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stage": 3}, "line 1: field 'stage' must be 1"),
        (
            {"candidates": [{"label": "A", "pool": "conditioned_rare"}]},
            "field 'candidates[0]': field 'finalists'",
        ),
        (
            {"candidates": [{"label": "A", "pool": "conditioned_rare", "finalists": [{"txt": "x"}]}]},
            "field 'candidates[0]': field 'finalists[0]'",
        ),
        (
            {
                "candidates": [
                    {"label": "A", "pool": "conditioned_rare", "finalists": ["x"]},
                    {"label": "B", "pool": "conditioned_rare", "finalists": ["y"]},
                ]
            },
            "a pool may be shown as one set only",
        ),
        (
            {"candidates": [{"label": "A", "text": "x", "pool": "conditioned_rare"}]},
            "unknown field(s) ['text']",
        ),
    ],
)
def test_bad_stage_2_ballots_name_file_line_and_field(tmp_path, change: dict[str, Any], message: str) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps({**SET_BALLOT, **change}) + "\n")
    with pytest.raises(InputError) as e:
        read_ballots(path)
    assert str(path) in str(e.value) and message in str(e.value)


def test_finalists_come_from_each_cohorts_own_ballots_or_both() -> None:
    from lmaudit.studies.choir.config import ChoirStudyConfig
    from lmaudit.studies.choir.ranking import finalist_sets

    pool_row = {"question": "q1", "candidates": [_cand(c) for c in sorted(CANDS)]}

    def done(cohort: str, ranking: list[str], k: int) -> dict[str, Any]:
        b = _stage1(cohort, ranking, k)
        by_label = {c["id"]: c["label"] for c in b["candidates"]}
        return {**b, "parsed": {"valid": True, "ranking": [by_label[c] for c in ranking]}}

    # conditioned consensus: the conditioned cohort's ballot gives cc-2 3, cc-1 2; the
    # unconditioned cohort's two give cc-1 3 + 3, cc-2 2 + 2 (sets in pool order: index 2)
    stage1 = [
        done("conditioned", ["cc-2", "cc-1", "cr-1", "uc-1", "ur-1"], 1),
        done("unconditioned", ["cc-1", "cc-2", "cr-1", "uc-1", "ur-1"], 1),
        done("unconditioned", ["cc-1", "cc-2", "cr-1", "uc-1", "ur-1"], 2),
    ]
    s = ChoirStudyConfig()
    s.ranking.finalists = 1
    own = finalist_sets(s, [pool_row], stage1)
    first = {c: own[("q1", c)]["sets"][2]["finalists"][0]["id"] for c in ("conditioned", "unconditioned")}
    assert first == {"conditioned": "cc-2", "unconditioned": "cc-1"}
    assert [x["pool"] for x in own[("q1", "conditioned")]["sets"]] == [
        "unconditioned_consensus",
        "unconditioned_rare",
        "conditioned_consensus",
        "conditioned_rare",
    ]
    s.ranking.finalists_from = "pooled"  # both cohorts' ballots: cc-1 8 points, cc-2 7, for both
    pooled = finalist_sets(s, [pool_row], stage1)
    assert {
        c: pooled[("q1", c)]["sets"][2]["finalists"][0]["id"] for c in ("conditioned", "unconditioned")
    } == {
        "conditioned": "cc-1",
        "unconditioned": "cc-1",
    }
