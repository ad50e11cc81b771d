"""Human calibration (appendix D.1): counts and the paired participant-level exact sign-flip
test, checked against a brute-force enumeration written here."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from choir_quick import typed_results
from lmaudit.errors import InputError
from lmaudit.pipeline import run
from lmaudit.studies.choir.calibration import agreement, analyze_calibration, read_calibration


def _records(rng: np.random.Generator, n_part: int, n_q: int) -> list[dict]:
    recs = []
    for q in range(n_q):
        recs.append({"kind": "cohort_top", "cohort": "conditioned", "question": f"q{q}", "item": "c"})
        # the cohorts agree on even questions
        recs.append(
            {
                "kind": "cohort_top",
                "cohort": "unconditioned",
                "question": f"q{q}",
                "item": "c" if q % 2 == 0 else "u",
            }
        )
        recs.append({"kind": "pool", "question": f"q{q}", "n_items": 4, "n_conditioned": 2})
    for p in range(n_part):
        for q in range(n_q):
            item = str(rng.choice(["c", "u", "x", "y"], p=[0.4, 0.25, 0.2, 0.15]))
            recs.append(
                {
                    "kind": "choice",
                    "participant": f"p{p}",
                    "question": f"q{q}",
                    "item": item,
                    "source": "conditioned" if item in ("c", "x") else "unconditioned",
                }
            )
    return recs


def test_counts_and_sign_flip_match_brute_force(tmp_path):
    rng = np.random.default_rng(5)
    recs = _records(rng, n_part=9, n_q=6)
    path = tmp_path / "cal.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = analyze_calibration(read_calibration(path))
    assert out is not None
    choices = [r for r in recs if r["kind"] == "choice"]
    assert out.n_choices == 54 and out.n_participants == 9
    assert out.match_conditioned_top == sum(c["item"] == "c" for c in choices)
    unc_top = {f"q{q}": ("c" if q % 2 == 0 else "u") for q in range(6)}
    assert out.match_unconditioned_top == sum(c["item"] == unc_top[c["question"]] for c in choices)
    assert out.conditioned_source == sum(c["source"] == "conditioned" for c in choices)
    assert out.conditioned_expected == pytest.approx(54 * 0.5)
    # the sign-flip p by enumerating all 2^9 sign patterns of the per-participant differences
    d = {}
    for c in choices:
        d[c["participant"]] = (
            d.get(c["participant"], 0) + (c["item"] == "c") - (c["item"] == unc_top[c["question"]])
        )
    v = np.array(list(d.values()))
    sums = [abs(int(np.dot(v, s))) for s in itertools.product((-1, 1), repeat=v.size)]
    assert out.sign_flip.sum == int(v.sum())
    assert out.sign_flip.p == sum(x >= abs(int(v.sum())) for x in sums) / 2**v.size
    # on the questions where the cohorts disagree (odd ones) only
    assert out.cohorts_disagree.questions == 3
    assert out.cohorts_disagree.n_choices == 27


def test_bad_calibration_records_name_line_and_field(tmp_path):
    path = tmp_path / "cal.jsonl"
    path.write_text(
        json.dumps({"kind": "choice", "participant": "p", "question": "q", "item": "i", "source": "both"})
        + "\n"
    )
    with pytest.raises(InputError, match="line 1: field 'source' = 'both'"):
        read_calibration(path)


def test_calibration_goes_through_the_pipeline(make_cfg, tmp_path):
    path = tmp_path / "cal.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _records(np.random.default_rng(1), 4, 3)))
    run(
        make_cfg(
            "study=choir",
            "ensemble=sim",
            "study.embedder.kind=sim",
            "study.question_ids=[H001,H002]",
            "study.generations=1",
            "study.shuffles=20",
            "study.permutations=20",
            "study.n_boot=20",
            "study.n_null=10",
            f"study.calibration_path={path}",
            "mlflow.enabled=false",
            name="cal",
        )
    )
    res = typed_results(tmp_path / "cal/results.json")
    assert res["calibration"]["n_choices"] == 12 and res["calibration"]["n_participants"] == 4
    plan = json.loads((tmp_path / "cal/plan.json").read_text())
    assert plan["inputs"]["calibration"]["path"] == str(path)


def test_agreement_matches_pair_enumeration():
    """Modal share and pairwise agreement per question, averaged over questions, against an
    enumeration of every pair of participants; the random baseline is 1 / pool size."""
    rng = np.random.default_rng(11)
    recs = _records(rng, n_part=7, n_q=5)
    cal = analyze_calibration(r | {"kind": f"calibration_{r['kind']}"} for r in recs)
    assert cal is not None and cal.agreement is not None
    out = cal.agreement
    by_q: dict[str, list[str]] = {}
    for c in recs:
        if c["kind"] == "choice":
            by_q.setdefault(c["question"], []).append(c["item"])
    modal = [max(v.count(x) for x in v) / len(v) for v in by_q.values()]
    pairs = [np.mean([a == b for a, b in itertools.combinations(v, 2)]) for v in by_q.values()]
    assert out.n_questions == 5
    assert out.mean_modal_share == pytest.approx(np.mean(modal), abs=1e-15)
    assert out.pairwise_agreement == pytest.approx(np.mean(pairs), abs=1e-15)
    assert out.uniform_baseline == pytest.approx(0.25, abs=1e-15)  # every pool holds 4 items


def test_agreement_closed_form_and_missing_pools():
    choices = [
        {"question": "q1", "item": "a"},
        {"question": "q1", "item": "a"},
        {"question": "q1", "item": "b"},
        {"question": "q2", "item": "a"},
        {"question": "q2", "item": "b"},
        {"question": "q2", "item": "c"},
    ]
    out = agreement(choices, {"q1": {"n_items": 3}})
    assert out is not None
    assert out.mean_modal_share == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert out.pairwise_agreement == pytest.approx((1 / 3 + 0) / 2)
    assert out.uniform_baseline is None  # q2 has no pool size
    both = agreement(choices, {"q1": {"n_items": 3}, "q2": {"n_items": 4}})
    assert both is not None
    assert both.uniform_baseline == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert agreement(choices[:1], {}) is None  # one participant: no pair to agree
