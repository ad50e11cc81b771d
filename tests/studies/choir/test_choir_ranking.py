"""The source-blind ranking module (appendix D): Borda with family collapse against a worked
example, ballot parsing on messy answers, planted evaluator preferences recovered through the
pipeline, ballots imported from JSONL, and the calibration reading the ranking's cohort tops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lmaudit.backends.base import SampleRequest
from lmaudit.backends.sim.ranker import RankingSampler
from lmaudit.pipeline import run
from lmaudit.provenance.io import InputError
from lmaudit.studies.choir.ballots import parse_ranking, read_ballots, render_prompt, render_sets_prompt
from lmaudit.studies.choir.borda import analyze_ranking, borda
from lmaudit.studies.choir.calibration import analyze_calibration
from lmaudit.studies.choir.finalists import select_finalists
from lmaudit.studies.choir.pools import source_of

LABELS = ["A", "B", "C", "D"]


def test_borda_with_family_collapse_matches_the_worked_example() -> None:
    # a1 and a2 are one concept family (F1); b (F2) and c (F3) are their own
    family = {"a1": "F1", "a2": "F1", "b": "F2", "c": "F3"}
    ballots = [["a1", "b", "a2", "c"], ["b", "a2", "c", "a1"], ["c", "a1", "b", "a2"]]
    # by hand: three families per ballot score 2, 1, 0 in order of first appearance
    #   ballot 1: F1 2 (a1), F2 1 (b), F3 0;  ballot 2: F2 2 (b), F1 1 (a2), F3 0;
    #   ballot 3: F3 2 (c), F1 1 (a1), F2 0
    b = borda(ballots, family)
    assert b.family_points == {"F1": 4, "F2": 3, "F3": 2}
    assert b.candidate_points == {"a1": 3, "a2": 1, "b": 3, "c": 2}
    assert b.family_firsts == {"F1": 1, "F2": 1, "F3": 1}
    # without the collapse (4 candidates: 3, 2, 1, 0) b would win: a1 5, a2 3, b 6, c 4
    plain = borda(ballots, {c: c for c in family})
    assert plain.family_points == {"a1": 5, "a2": 3, "b": 6, "c": 4}


@pytest.mark.parametrize(
    ("raw", "ranking", "completed"),
    [
        ("C > A > D > B", ["C", "A", "D", "B"], False),
        ("  c>a>d>b.\n", ["C", "A", "D", "B"], False),
        ("Ranking: C, A, D, B", ["C", "A", "D", "B"], False),
        ("Here is my ranking:\n\n**C > A > D > B**\n\nHope this helps!", ["C", "A", "D", "B"], False),
        ("1. C. The first text\n2. A - another\n3. D: third\n4. B", ["C", "A", "D", "B"], False),
        (
            "My ranking:\n1) (C) text\n2) [A] text\n3) Candidate D\n4) B\n\nB is weakest.",
            ["C", "A", "D", "B"],
            False,
        ),
        ("C > A > D", ["C", "A", "D", "B"], True),  # one omitted letter goes last
        ("```\nC > A > D > B\n```", ["C", "A", "D", "B"], False),
    ],
)
def test_messy_answers_are_read(raw: str, ranking: list[str], completed: bool) -> None:
    p = parse_ranking(raw, LABELS)
    assert p.valid and p.ranking == ranking and p.completed == completed, p


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("", "empty output"),
        ("I cannot rank these; all have merit.", "no ranking found"),
        ("C > A", "ranks 2 of 4"),
        ("C > A > C > B", "letter C is ranked twice"),
        ("C > E > A > B", "letter E is not a shown candidate"),
        ("C > A > D > B\nActually: A > C > D > B", "two different rankings"),
        ("1. A good answer is hard to pick\n2. Both are fine", "no ranking found"),
    ],
)
def test_invalid_ballots_say_why(raw: str, error: str) -> None:
    p = parse_ranking(raw, LABELS)
    assert not p.valid and p.ranking == [] and error in str(p.error)


def test_prompt_hides_sources_and_letters_the_candidates() -> None:
    text = render_prompt(None, "Why?", ["one", "two", "three"])
    assert "A. one\nB. two\nC. three" in text and "C > B > A" in text
    assert "conditioned" not in text and "pool" not in text


def _ranker(name: str, **params: Any) -> str:
    inner = ", ".join(f"{k}: {v}" for k, v in params.items())
    return f"{{backend: sim, name: {name}, agent: ranker, params: {{{inner}}}}}"


COMMON = (
    "study=choir",
    "study.ensemble.members=[{backend: sim, name: m1, agent: freelist, params: {signature: 1}},"
    "{backend: sim, name: m2, agent: freelist, params: {signature: 2}},"
    "{backend: sim, name: m3, agent: freelist, params: {signature: 3}}]",
    "study.question_ids=[H001,H002,H007]",
    "study.templates=[A]",
    "study.personas=[archivist,promoter]",
    "study.generations=3",
    "study.items_per_list=12",
    "study.embedder.kind=sim",
    "study.shuffles=50",
    "study.permutations=50",
    "study.n_boot=50",
    "study.n_null=20",
    "mlflow.enabled=false",
)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _export(ballots: list[dict[str, Any]]) -> str:
    """Ballot records as the import's JSONL (stage 1: candidates; stage 2: finalist sets)."""
    keys = ("question", "stage", "cohort", "evaluator", "persona", "replicate", "raw")
    out = []
    for b in ballots:
        if b["stage"] == 1:
            cands = [{k: c[k] for k in ("label", "id", "text", "pool", "family")} for c in b["candidates"]]
        else:
            cands = [{k: c[k] for k in ("label", "pool", "finalists")} for c in b["candidates"]]
        out.append(json.dumps({**{k: b[k] for k in keys}, "candidates": cands}) + "\n")
    return "".join(out)


def test_planted_finalist_outcomes_are_recovered_and_ballots_round_trip(make_cfg, tmp_path) -> None:
    # stage 1 favours conditioned sources in both cohorts (+3), so the one-round rule would give
    # the unconditioned cohort 3/3; the finalist stage is planted the other way: unconditioned
    # turns favour unconditioned sets (-3), a persona turns that round (+6), rare sets +2
    planted = {
        "conditioned_preference": 3.0,
        "finalist_conditioned_preference": -3.0,
        "finalist_persona_preference": 6.0,
        "rare_preference": 2.0,
        "taste": 0.2,
        "noise": 0.3,
    }
    evaluators = [
        _ranker("r1", **planted),
        _ranker("r2", **planted, style="numbered", seed=1),
        _ranker("r3", **planted, style="chatty", seed=2),
        _ranker("r4", conditioned_preference=0.0, invalid=1.0),  # never answers with a ranking
    ]
    run(make_cfg(*COMMON, f"study.ensemble.evaluators=[{', '.join(evaluators)}]", name="planted"))
    res = json.loads((tmp_path / "planted/results.json").read_text())["ranking"]
    s = res["summary"]
    # per stage: 3 questions x 4 evaluators x (no persona + 2 personas); r4's all invalid
    assert s["by_stage"] == {
        "stage1": {"n_ballots": 36, "n_invalid": 9},
        "stage2": {"n_ballots": 36, "n_invalid": 9},
    }
    assert s["invalid_by_error"] == {
        "no ranking found (neither 'C > A > B' nor a numbered list of letters)": 18
    }
    assert s["conditioned_cohort"] == {
        "count": 3,
        "n": 3,
        "share": 1.0,
        "ties": 0,
        "decided_by": {"finalists": 3},
    }
    assert s["unconditioned_cohort"]["count"] == 0 and s["unconditioned_cohort"]["n"] == 3
    assert (s["agree_top"]["count"], s["agree_top"]["n"]) == (0, 3)  # different pools advanced
    for v in res["questions"].values():
        con, unc = v["cohorts"]["conditioned"], v["cohorts"]["unconditioned"]
        assert con["advanced_pool"] == "conditioned_rare" and unc["advanced_pool"] == "unconditioned_rare"
        # the stage-1 leaders were conditioned-source in both cohorts: the finalist stage decided
        assert con["stage1"]["leader"]["source"] == unc["stage1"]["leader"]["source"] == "conditioned"
        assert unc["top"]["id"] in unc["stage2"]["finalists"]["unconditioned_rare"]
        assert (
            con["top_status"] == "tie" or con["top"]["id"] in con["stage2"]["finalists"]["conditioned_rare"]
        )
        assert all(len(f) <= 2 for f in con["stage2"]["finalists"].values())  # ranking.finalists: 2
    rows = _rows(tmp_path / "planted/measurements.jsonl")
    ballots = [r for r in rows if r["kind"] == "ballot"]
    assert len(ballots) == 72 and all(r["raw"] and r["prompt"] and r["order_seed"] for r in ballots)
    sets = [b for b in ballots if b["stage"] == 2]
    assert all(
        "Set A:" in b["prompt"][-1]["content"] and "pool" not in b["prompt"][-1]["content"] for b in sets
    )
    assert all(b["prompt"][0]["role"] == "system" for b in ballots if b["cohort"] == "conditioned")
    assert all(b["prompt"][0]["role"] == "user" for b in ballots if b["cohort"] == "unconditioned")
    # the finalists shown are the cohort's stage-1 picks: the same sets in every ballot of a cohort
    for q in res["questions"]:
        for c in ("conditioned", "unconditioned"):
            seen = {
                json.dumps(
                    sorted((x["pool"], sorted(f["id"] for f in x["finalists"])) for x in b["candidates"])
                )
                for b in sets
                if b["question"] == q and b["cohort"] == c
            }
            assert len(seen) == 1
    # export lists and ballots of both stages, import both: the same outcomes without any model
    lists = [r for r in rows if r["kind"] == "list"]
    lp, bp = tmp_path / "lists.jsonl", tmp_path / "ballots.jsonl"
    keys = ("model", "question", "template", "temperature", "persona", "generation")
    lp.write_text("".join(json.dumps({**{k: r[k] for k in keys}, "raw": r["raw"]}) + "\n" for r in lists))
    bp.write_text(_export(ballots))
    run(make_cfg(*COMMON, f"study.import_path={lp}", f"study.ranking.import_path={bp}", name="imported"))
    again = json.loads((tmp_path / "imported/results.json").read_text())["ranking"]
    assert again["summary"] == s
    assert {q: v["cohorts"] for q, v in again["questions"].items()} == {
        q: v["cohorts"] for q, v in res["questions"].items()
    }
    # the same stage-1 ballots alone: decided by stage 1, as one-round ballots are
    bp.write_text(_export([b for b in ballots if b["stage"] == 1]))
    run(make_cfg(*COMMON, f"study.import_path={lp}", f"study.ranking.import_path={bp}", name="one_round"))
    one = json.loads((tmp_path / "one_round/results.json").read_text())["ranking"]["summary"]
    assert one["unconditioned_cohort"]["decided_by"] == {"stage1": 3}
    assert one["unconditioned_cohort"]["count"] == 3


def test_the_ranking_is_off_without_evaluators(make_cfg, tmp_path) -> None:
    run(make_cfg(*COMMON, name="off"))
    assert json.loads((tmp_path / "off/results.json").read_text())["ranking"] is None


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


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cohort": "both"}, "line 1: field 'cohort' = 'both'"),
        (
            {"candidates": [{"label": "A", "text": "x"}]},
            "line 1: field 'candidates[0]': needs 'pool' or 'source'",
        ),
        ({"candidates": [{"label": "A", "text": "x", "pool": "deep"}]}, "field 'pool' = 'deep'"),
        (
            {
                "candidates": [
                    {"label": "A", "text": "x", "pool": "conditioned_rare", "source": "unconditioned"}
                ]
            },
            "contradicts",
        ),
        ({"raw": "B > A"}, "give exactly one of 'raw'"),
        ({"extra": 1}, "unknown field(s) ['extra']"),
        ({"replicate": -1}, "field 'replicate' must be an integer >= 0"),
    ],
)
def test_bad_ballots_name_file_line_and_field(tmp_path, change: dict[str, Any], message: str) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps({**BALLOT, **change}) + "\n")
    with pytest.raises(InputError, match=None) as e:
        read_ballots(path)
    assert str(path) in str(e.value) and message in str(e.value)


def test_a_second_ballot_of_the_same_evaluator_is_refused(tmp_path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text((json.dumps(BALLOT) + "\n") * 2)
    with pytest.raises(InputError, match="line 2: a second stage-1 ballot of evaluator e1"):
        read_ballots(path)


def test_calibration_reads_the_ranking_tops_when_none_are_given() -> None:
    tops = [
        {"kind": "calibration_cohort_top", "cohort": "conditioned", "question": "q", "item": "c"},
        {"kind": "calibration_cohort_top", "cohort": "unconditioned", "question": "q", "item": "u"},
    ]
    choices = [
        {
            "kind": "calibration_choice",
            "participant": f"p{i}",
            "question": "q",
            "item": item,
            "source": "conditioned",
        }
        for i, item in enumerate(["c", "c", "u", "x"])
    ]
    out = analyze_calibration(choices, tops)
    assert out is not None and out["cohort_tops_from"] == "ranking"
    assert (out["match_conditioned_top"], out["match_unconditioned_top"]) == (2, 1)
    given = [{**tops[0], "item": "x"}, tops[1]]
    out = analyze_calibration(choices + given, tops)
    assert out is not None and out["cohort_tops_from"] == "records" and out["match_conditioned_top"] == 1


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
    con = out["questions"]["q1"]["cohorts"]["conditioned"]
    assert con["stage2"]["set_points"] == {
        "conditioned_consensus": 8,
        "conditioned_rare": 6,
        "unconditioned_consensus": 3,
        "unconditioned_rare": 1,
    }
    assert {r["id"]: r["points"] for r in con["stage1"]["borda"]} == {
        "cr-1": 5,
        "cc-1": 4,
        "cc-2": 3,
        "ur-1": 0,
        "uc-1": 0,
    }
    assert (con["decided_by"], con["advanced_pool"], con["tie"]) == (
        "finalists",
        "conditioned_consensus",
        False,
    )
    assert (con["top"]["id"], con["top_status"]) == ("cc-1", "ok")
    # the stage-1 leader (cr-1, conditioned rare) is not what the finalist stage advanced
    assert con["stage1"]["leader"]["id"] == "cr-1"
    unc = out["questions"]["q1"]["cohorts"]["unconditioned"]
    assert unc["stage2"]["set_points"]["unconditioned_consensus"] == 5
    assert (unc["advanced_pool"], unc["advanced_source"], unc["tie"]) == (None, None, True)
    assert unc["tied_pools"] == ["conditioned_consensus", "unconditioned_consensus"]
    assert (unc["top"], unc["top_status"]) == (None, "advanced pool tied")
    s = out["summary"]
    assert s["conditioned_cohort"] == {
        "count": 1,
        "n": 1,
        "share": 1.0,
        "ties": 0,
        "decided_by": {"finalists": 1},
    }
    # the tie counts against both claims: not conditioned-advanced, not agreement
    assert (
        s["unconditioned_cohort"]["count"],
        s["unconditioned_cohort"]["n"],
        s["unconditioned_cohort"]["ties"],
    ) == (
        0,
        1,
        1,
    )
    assert s["agree_top"] == {"count": 0, "n": 1, "share": 0.0, "ties": 1}
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
    con = out["questions"]["q1"]["cohorts"]["conditioned"]
    pts = {r["id"]: r["points"] for r in con["stage1"]["borda"]}
    assert (pts["cc-1"], pts["cc-2"]) == (7, 7)
    assert (con["advanced_pool"], con["top"], con["top_status"]) == ("conditioned_consensus", None, "tie")
    assert out["summary"]["conditioned_cohort"]["count"] == 1  # the pool is advanced; its top is tied


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
    unc = out["questions"]["q1"]["cohorts"]["unconditioned"]
    assert unc["stage1"]["tie"] and unc["decided_by"] == "stage1"
    assert (unc["advanced_pool"], unc["top"], unc["top_status"]) == (None, None, "tie")
    con = out["questions"]["q1"]["cohorts"]["conditioned"]
    assert (con["decided_by"], con["advanced_pool"], con["top"]["id"]) == (
        "stage1",
        "conditioned_rare",
        "cr-1",
    )
    s = out["summary"]
    assert (s["unconditioned_cohort"]["count"], s["unconditioned_cohort"]["n"]) == (0, 1)
    assert s["agree_top"] == {"count": 0, "n": 1, "share": 0.0, "ties": 1}


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


def test_the_sim_ranker_plants_a_finalist_preference() -> None:
    sets = [
        {"label": "A", "source": "unconditioned", "pool": "unconditioned_consensus", "texts": ["u1", "u2"]},
        {"label": "B", "source": "conditioned", "pool": "conditioned_consensus", "texts": ["c1", "c2"]},
        {"label": "C", "source": "unconditioned", "pool": "unconditioned_rare", "texts": ["u3"]},
    ]
    sim = RankingSampler(
        conditioned_preference=-5.0, finalist_conditioned_preference=5.0, taste=0.0, noise=0.1, style="chatty"
    )
    reqs = [
        SampleRequest(
            messages=({"role": "user", "content": "x"},),
            n=1,
            temperature=0.0,
            top_p=1.0,
            max_tokens=96,
            seed=i,
            meta={"kind": "finalists", "persona": "none", "candidates": sets},
        )
        for i in range(20)
    ]
    answers = [r.texts[0] for r in sim.sample(reqs)]
    assert all("Set B > Set " in a for a in answers)  # the planted set wins every ballot
    assert all(parse_ranking(a, ["A", "B", "C"], noun="set").ranking[0] == "B" for a in answers)
    # stage-1 requests keep the stage-1 preference (-5: the conditioned candidate last)
    one = [
        {"label": c["label"], "source": c["source"], "pool": c["pool"], "text": c["texts"][0]} for c in sets
    ]
    stage1 = SampleRequest(
        messages=({"role": "user", "content": "x"},),
        n=1,
        temperature=0.0,
        top_p=1.0,
        max_tokens=96,
        seed=0,
        meta={"kind": "ranking", "persona": "none", "candidates": one},
    )
    assert sim.sample([stage1])[0].texts[0].split("**")[1].endswith("B")
    # the identity names the finalist fields only when given (earlier caches keep their keys)
    assert "finalist_conditioned_preference" in sim.identity
    assert "finalist_conditioned_preference" not in RankingSampler().identity


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
