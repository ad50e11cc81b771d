"""The source-blind ranking module (appendix D): Borda with family collapse against a worked
example, ballot parsing on messy answers, planted finalist-stage outcomes recovered through the
pipeline, ballots of both stages imported from JSONL, and the calibration reading the ranking's
cohort tops (the finalist stage by hand: test_choir_finalists.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from choir_quick import QUICK_CHOIR, typed_results
from lmaudit.backends.base import SampleRequest
from lmaudit.backends.sim.ranker import RankingSampler
from lmaudit.errors import InputError
from lmaudit.pipeline import run
from lmaudit.studies.choir.ballots import parse_ranking, read_ballots, render_prompt
from lmaudit.studies.choir.calibration import analyze_calibration
from lmaudit.studies.choir.tally import borda

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
    *QUICK_CHOIR,
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
    res = typed_results(tmp_path / "planted/results.json")["ranking"]
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
        # within the advanced pool the top may tie (its finalists' stage-1 points are not planted)
        for cohort, pool in ((unc, "unconditioned_rare"), (con, "conditioned_rare")):
            assert cohort["top_status"] in ("ok", "tie")
            assert cohort["top_status"] == "tie" or cohort["top"]["id"] in cohort["stage2"]["finalists"][pool]
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
    again = typed_results(tmp_path / "imported/results.json")["ranking"]
    assert again["summary"] == s
    assert {q: v["cohorts"] for q, v in again["questions"].items()} == {
        q: v["cohorts"] for q, v in res["questions"].items()
    }
    # the same stage-1 ballots alone: decided by stage 1, as one-round ballots are
    bp.write_text(_export([b for b in ballots if b["stage"] == 1]))
    run(make_cfg(*COMMON, f"study.import_path={lp}", f"study.ranking.import_path={bp}", name="one_round"))
    one = typed_results(tmp_path / "one_round/results.json")["ranking"]["summary"]
    assert one["unconditioned_cohort"]["decided_by"] == {"stage1": 3}
    assert one["unconditioned_cohort"]["count"] == 3


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


def test_the_ranking_is_off_without_evaluators(make_cfg, tmp_path) -> None:
    run(make_cfg(*COMMON, name="off"))
    assert typed_results(tmp_path / "off/results.json")["ranking"] is None


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
    assert out is not None and out.cohort_tops_from == "ranking"
    assert (out.match_conditioned_top, out.match_unconditioned_top) == (2, 1)
    given = [{**tops[0], "item": "x"}, tops[1]]
    out = analyze_calibration(choices + given, tops)
    assert out is not None and out.cohort_tops_from == "records" and out.match_conditioned_top == 1
