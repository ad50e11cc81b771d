"""The analysis' pure functions against independent computations and the seed's rules."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from lmaudit.studies.judge.disagreement import Judgment, analyze, classify, disagreement, sign_test


def _sign_test_by_hand(up: int, down: int) -> float:
    n = up + down
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(up, down) + 1)) / 2**n
    return min(1.0, 2 * tail)


@pytest.mark.parametrize(
    ("up", "down"), [(0, 0), (1, 0), (5, 0), (3, 3), (7, 2), (0, 12), (40, 25), (13, 14)]
)
def test_sign_test_matches_the_binomial_sum(up, down):
    assert sign_test(up, down) == pytest.approx(_sign_test_by_hand(up, down), rel=1e-12, abs=1e-15)


def test_interval_matches_scipy_exact_interval():
    ref = {f"i{i}": {r: "A" for r in range(5)} for i in range(8)}
    cond = {f"i{i}": {r: ("B" if (i + r) % 3 == 0 else "A") for r in range(5)} for i in range(8)}
    d = disagreement(ref, cond, list(ref), alpha=0.05)
    k = sum((i + r) % 3 == 0 for i in range(8) for r in range(5))
    assert (d.changed, d.n) == (k, 40)
    ci = stats.binomtest(k, 40).proportion_ci(confidence_level=0.95, method="exact")
    assert d.ci.low == pytest.approx(ci.low, abs=1e-10)
    assert d.ci.high == pytest.approx(ci.high, abs=1e-10)
    assert (d.sign_test.toward_A, d.sign_test.toward_B, d.sign_test.method) == (0, k, "exact binomial")
    assert d.sign_test.p == pytest.approx(_sign_test_by_hand(0, k))


def test_ties_count_as_disagreements_and_invalid_pairs_are_left_out():
    ref = {"a": {0: "A"}, "b": {0: "TIE"}, "c": {0: None}, "d": {0: "B"}}
    cond = {"a": {0: "TIE"}, "b": {0: "A"}, "c": {0: "A"}, "d": {0: None}}
    d = disagreement(ref, cond, ["a", "b", "c", "d"], alpha=0.05)
    assert (d.changed, d.n, d.excluded_invalid) == (2, 2, 2)
    assert d.changed_prompts == ("a", "b")
    assert (d.sign_test.toward_A, d.sign_test.toward_B) == (1, 1)


@pytest.mark.parametrize(
    ("p0", "pa", "pb", "pab", "want"),
    [
        ("A", "A", "A", "B", "COMMON_WRAPPER_OR_REPEAT_UNSTABLE"),
        ("A", "A", "B", "TIE", "COMMON_WRAPPER_OR_REPEAT_UNSTABLE"),  # rule 1 wins over rule 2
        ("B", "A", "B", "B", "WRAPPER_ATTRACTION_PATTERN"),
        ("A", "A", "B", "A", "WRAPPER_ATTRACTION_PATTERN"),
        ("A", "B", "A", "A", "WRAPPER_AVERSION_PATTERN"),
        ("TIE", "TIE", "TIE", "TIE", "CONTENT_STABLE"),
        ("A", "A", "A", "A", "CONTENT_STABLE"),
        ("A", "TIE", "B", "A", "MIXED_OR_TIE"),
        ("A", "A", "TIE", "A", "MIXED_OR_TIE"),
        ("B", "A", "A", "B", "MIXED_OR_TIE"),
        (None, "A", "B", "A", "NOT_CLASSIFIABLE"),
        ("A", "A", "B", None, "NOT_CLASSIFIABLE"),
        ("A", None, "B", "B", "COMMON_WRAPPER_OR_REPEAT_UNSTABLE"),  # decided before PA is needed
        ("A", None, "B", "A", "NOT_CLASSIFIABLE"),
        ("A", "TIE", None, "A", "MIXED_OR_TIE"),  # no value of PB changes it
        ("A", "B", None, "A", "NOT_CLASSIFIABLE"),  # PB = A would make it an aversion pattern
        ("TIE", None, "TIE", "TIE", "NOT_CLASSIFIABLE"),
    ],
)
def test_classification_follows_the_seeds_order(p0, pa, pb, pab, want):
    assert classify(p0, pa, pb, pab) == want


def test_a_missing_label_leaves_a_prompt_unclassified_exactly_when_it_could_change_the_class():
    import itertools

    labels = ("A", "B", "TIE")
    for got in itertools.product((*labels, None), repeat=4):
        holes = [i for i, x in enumerate(got) if x is None]
        classes = set()
        for fill in itertools.product(labels, repeat=len(holes)):
            full = list(got)
            for i, x in zip(holes, fill, strict=True):
                full[i] = x
            classes.add(classify(*full))
        want = classes.pop() if len(classes) == 1 else "NOT_CLASSIFIABLE"
        assert classify(*got) == want, got


def test_k_replicates_pair_by_index_and_give_a_repeat_baseline():
    conds = [{"id": "P0", "wrap": [], "swap": False}, {"id": "PA", "wrap": ["A"], "swap": False}]
    js = []
    for r in range(4):
        js.append(Judgment("P0", "x", r, True, "A" if r < 3 else "B", 0.5))
        js.append(Judgment("PA", "x", r, True, "A", 0.9))
    res = analyze(js, conditions=conds, reference="P0", items=["x"], alpha=0.05)
    dis = {d.comparison: d for d in res.disagreement}
    assert (dis["PA vs P0"].changed, dis["PA vs P0"].n) == (1, 4)
    assert dis["P0 vs P0 (repeat)"].repeat_pairs == ((0, 1), (2, 3))
    assert (dis["P0 vs P0 (repeat)"].changed, dis["P0 vs P0 (repeat)"].n) == (1, 2)
    assert res.k == 4 and res.classification.evaluable is False
    assert res.conditions["P0"].confidence.mean == 0.5
    assert res.items[0].labels == {"P0": ("A", "A", "A", "B"), "PA": ("A", "A", "A", "A")}


def test_swapped_condition_is_compared_in_the_original_orientation():
    conds = [{"id": "P0", "wrap": [], "swap": False}, {"id": "SWAP", "wrap": [], "swap": True}]
    # winners are stored in the original orientation (the measurement maps a swapped label back)
    js = [Judgment("P0", "x", 0, True, "A", 1.0), Judgment("SWAP", "x", 0, True, "A", 1.0)]
    res = analyze(
        js, conditions=conds, reference="P0", items=["x"], alpha=0.05, mapping={"x": {"A": "m1", "B": "m2"}}
    )
    assert res.disagreement[0].changed == 0
    assert res.model_wins.by_condition["SWAP"].wins == {"m1": 1, "m2": 0}


_WRAPPER = [
    {"id": "P0", "wrap": [], "swap": False},
    {"id": "PA", "wrap": ["A"], "swap": False},
    {"id": "PB", "wrap": ["B"], "swap": False},
    {"id": "PAB", "wrap": ["A", "B"], "swap": False},
]


def _judged(grid: dict[str, dict[str, list[str | None]]]) -> list[Judgment]:
    """``{item: {condition: [label per replicate]}}`` as judgments (None: invalid)."""
    return [
        Judgment(cid, item, r, lab is not None, lab, None if lab is None else 0.8)
        for item, by_cond in grid.items()
        for cid, labs in by_cond.items()
        for r, lab in enumerate(labs)
    ]


def _patterns_by_hand(grid):
    """Endpoints 4 and 5 straight from their definitions: both unilateral verdicts valid and
    decisive; attraction PA = A and PB = B, aversion PA = B and PB = A."""
    att = av = n = dec = 0
    for by_cond in grid.values():
        for x, y in zip(by_cond["PA"], by_cond["PB"], strict=True):
            if x is None or y is None:
                continue
            n += 1
            if {x, y} <= {"A", "B"}:
                dec += 1
                att += (x, y) == ("A", "B")
                av += (x, y) == ("B", "A")
    return att, av, n, dec


def test_attraction_and_aversion_endpoints_ignore_pab_where_the_classification_does_not():
    # p1: PAB moved too, so the classification's first rule takes it; the endpoint still counts it
    grid = {
        "p1": {"P0": ["A"], "PA": ["A"], "PB": ["B"], "PAB": ["B"]},
        "p2": {"P0": ["B"], "PA": ["A"], "PB": ["B"], "PAB": ["B"]},
        "p3": {"P0": ["A"], "PA": ["B"], "PB": ["A"], "PAB": ["TIE"]},
        "p4": {"P0": ["A"], "PA": ["TIE"], "PB": ["B"], "PAB": ["A"]},  # not decisive
        "p5": {"P0": ["A"], "PA": [None], "PB": ["B"], "PAB": ["A"]},  # invalid side
    }
    res = analyze(_judged(grid), conditions=_WRAPPER, reference="P0", items=list(grid), alpha=0.05)
    pat = res.patterns
    assert (pat.attraction.count, pat.aversion.count, pat.n, pat.n_both_decisive) == (_patterns_by_hand(grid))
    assert pat.attraction.prompts == ("p1", "p2") and pat.aversion.prompts == ("p3",)
    assert pat.excluded_invalid == 1
    counts = res.classification.counts
    assert counts["WRAPPER_ATTRACTION_PATTERN"] == 1 and counts["COMMON_WRAPPER_OR_REPEAT_UNSTABLE"] == 2


def test_pattern_endpoints_match_their_definition_on_random_designs():
    import random

    rng = random.Random(7)
    for _ in range(200):
        k = rng.randint(1, 3)
        grid = {
            f"i{i}": {c["id"]: [rng.choice(["A", "B", "TIE", None]) for _ in range(k)] for c in _WRAPPER}
            for i in range(rng.randint(1, 6))
        }
        pat = analyze(
            _judged(grid), conditions=_WRAPPER, reference="P0", items=list(grid), alpha=0.05
        ).patterns
        got = (pat.attraction.count, pat.aversion.count, pat.n, pat.n_both_decisive)
        assert got == _patterns_by_hand(grid), grid


def test_pattern_endpoints_need_both_unilateral_conditions():
    conds = [{"id": "P0", "wrap": [], "swap": False}, {"id": "PA", "wrap": ["A"], "swap": False}]
    grid = {"x": {"P0": ["A"], "PA": ["A"]}}
    res = analyze(_judged(grid), conditions=conds, reference="P0", items=["x"], alpha=0.05)
    assert res.patterns.evaluable is False


def test_ranking_change_is_judged_across_the_four_wrapper_conditions_only():
    conds = [*_WRAPPER, {"id": "SWAP", "wrap": [], "swap": True}]
    mapping = {"x": {"A": "m1", "B": "m2"}, "y": {"A": "m1", "B": "m2"}}
    grid = {
        "x": {"P0": ["A"], "PA": ["A"], "PB": ["A"], "PAB": ["A"], "SWAP": ["B"]},
        "y": {"P0": ["A"], "PA": ["A"], "PB": ["A"], "PAB": ["A"], "SWAP": ["B"]},
    }
    res = analyze(
        _judged(grid), conditions=conds, reference="P0", items=["x", "y"], alpha=0.05, mapping=mapping
    )
    mw = res.model_wins
    assert mw.ranking["SWAP"] != mw.ranking["P0"]  # SWAP's ranking differs and is reported
    assert mw.ranking_compared == ("P0", "PA", "PB", "PAB")
    assert mw.ranking_changes is False
    grid["y"]["PB"] = ["B"]
    grid["x"]["PB"] = ["B"]
    res = analyze(
        _judged(grid), conditions=conds, reference="P0", items=["x", "y"], alpha=0.05, mapping=mapping
    )
    assert res.model_wins.ranking_changes is True
    # without the four roles every condition present decides
    two = [_WRAPPER[0], conds[-1]]
    sub = {i: {c: g[c] for c in ("P0", "SWAP")} for i, g in grid.items()}
    res = analyze(_judged(sub), conditions=two, reference="P0", items=["x", "y"], alpha=0.05, mapping=mapping)
    assert res.model_wins.ranking_compared == ("P0", "SWAP") and res.model_wins.ranking_changes is True


def test_each_items_confidences_are_its_own_in_replicate_order_whatever_the_judgment_order():
    import random

    rng = random.Random(11)
    conds = [{"id": "P0", "wrap": [], "swap": False}, {"id": "PA", "wrap": ["A"], "swap": False}]
    items = [f"i{i}" for i in range(12)]
    js = [
        Judgment(c["id"], item, r, True, rng.choice(["A", "B"]), round(rng.random(), 3))
        for c in conds
        for item in items
        for r in range(3)
    ]
    want = {
        (j.condition, j.item): [
            x.confidence
            for x in sorted(js, key=lambda x: x.replicate)
            if (x.condition, x.item) == (j.condition, j.item)
        ]
        for j in js
    }
    rng.shuffle(js)
    res = analyze(js, conditions=conds, reference="P0", items=items, alpha=0.05)
    for row in res.items:
        assert row.confidence == {c["id"]: tuple(want[(c["id"], row.item)]) for c in conds}
