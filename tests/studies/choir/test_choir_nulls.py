"""The seed's signal-to-chance null (concept occurrences reassigned among the models' lists,
salience and RBO recomputed) against an independent implementation: Smith's S and RBO one list
at a time, the law enumerated over every permutation of a small pool; and on planted lists where
the two nulls must disagree."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from choir_questions import question

from lmaudit.stats.rbo import rbo_ext
from lmaudit.stats.salience import signal_to_chance, smiths_s
from lmaudit.studies.choir.nulls import (
    NullCounts,
    encode_occurrences,
    null_counts,
    rankings_of,
    reassignment_stc,
)
from lmaudit.studies.choir.results import QuestionResult
from lmaudit.studies.choir.results.question import CodebookTest, SignalToChance


def exact_s(lists):
    """Smith's S of each concept as a fraction, and the order of first appearance."""
    s: dict[int, Fraction] = {}
    for row in lists:
        for r, c in enumerate(row, 1):
            s[c] = s.get(c, Fraction(0)) + Fraction(len(row) - r + 1, len(row))
    return s


def tied_ranking(lists):
    """Concepts by exact S, equal S one tie group."""
    s = exact_s(lists)
    out = []
    for value in sorted(set(s.values()), reverse=True):
        group = [c for c in s if s[c] == value]
        out.append(group[0] if len(group) == 1 else frozenset(group))
    return out


def mean_rbo(per_model, ties):
    rankings = [tied_ranking(ls) if ties else smiths_s(ls).ranking() for ls in per_model]
    vals = [rbo_ext(a, b, 0.9) for a, b in itertools.combinations(rankings, 2)]
    return float(np.nanmean(vals))


def test_rankings_follow_smiths_s_and_its_exact_ties() -> None:
    rng = np.random.default_rng(0)
    for _ in range(150):
        n_models = int(rng.integers(2, 4))
        lists, owner = [], []
        for m in range(n_models):
            for _ in range(int(rng.integers(1, 4))):
                lists.append([int(c) for c in rng.choice(7, size=int(rng.integers(0, 5)), replace=False)])
                owner.append(m)
        arr, k = encode_occurrences(lists)
        codes = sorted({c for row in lists for c in row})
        ids, starts = rankings_of(arr[None], np.array(owner), n_models, max(k, 1), None, ties=True)
        for m in range(n_models):
            mine = [ls for ls, o in zip(lists, owner, strict=True) if o == m]
            got = [codes[c] for c in ids[0, m] if c >= 0]
            assert got == [int(c) for c in smiths_s(mine).ranking()]
            s = exact_s(mine)
            for r, c in enumerate(got):  # an entry starts its group iff its S differs from the one before
                assert starts[0, m, r] == (r + 1 if r == 0 or s[c] != s[got[r - 1]] else starts[0, m, r - 1])


@pytest.mark.parametrize("ties", [False, True])
def test_null_equals_the_enumerated_law(ties: bool) -> None:
    # three models; every permutation of the 8 occurrences over the 8 (list, rank) slots,
    # kept when no list holds a concept twice, is one equally likely deal
    per_model = [[[0, 1], [0]], [[2, 0], [1]], [[1, 3]]]
    lists = [ls for per in per_model for ls in per]
    owner = [m for m, per in enumerate(per_model) for _ in per]
    pool = [c for ls in lists for c in ls]
    lengths = [len(ls) for ls in lists]
    values = []
    for perm in itertools.permutations(pool):
        dealt, k = [], 0
        for n in lengths:
            dealt.append(list(perm[k : k + n]))
            k += n
        if all(len(set(d)) == len(d) for d in dealt):
            grouped = [[d for d, o in zip(dealt, owner, strict=True) if o == m] for m in range(3)]
            values.append(mean_rbo(grouped, ties))
    exact_mean = float(np.mean(values))
    n = 20000
    res = reassignment_stc(lists, owner, rng=np.random.default_rng(1), n_shuffles=n, ties=ties)
    assert res.observed == pytest.approx(mean_rbo(per_model, ties), abs=1e-12)
    assert abs(res.null_mean - exact_mean) < 4 * float(np.std(values)) / np.sqrt(n)
    # the whole law: each distinct value's probability, within 4 binomial standard errors
    law = {
        round(v, 9): c / len(values)
        for v, c in zip(*np.unique(np.round(values, 9), return_counts=True), strict=True)
    }
    got = dict(zip(*np.unique(np.round(res.null, 9), return_counts=True), strict=True))
    assert set(got) <= set(law)
    for v, prob in law.items():
        assert abs(got.get(v, 0) / n - prob) < 4 * np.sqrt(prob * (1 - prob) / n) + 1e-9


def planted(rng, ordered: bool, n_models=4, n_lists=8, width=8, pool=30):
    """Every model draws its lists from one shared popularity (no model signature); ``ordered``:
    entries in popularity order (a shared rank structure), else in random order."""
    w = 1.0 / np.arange(1, pool + 1) ** 1.2
    per_model = []
    for _ in range(n_models):
        per = []
        for _ in range(n_lists):
            picked = list(rng.choice(pool, size=width, replace=False, p=w / w.sum()))
            per.append(sorted(picked) if ordered else [int(c) for c in rng.permutation(picked)])
        per_model.append(per)
    return per_model


def test_the_two_nulls_disagree_where_only_frequency_is_shared() -> None:
    rng = np.random.default_rng(5)
    per_model = planted(rng, ordered=False)
    lists = [ls for per in per_model for ls in per]
    owner = [m for m, per in enumerate(per_model) for _ in per]
    rankings = [smiths_s(per).ranking() for per in per_model]
    # the models are exchangeable and ranks carry nothing: reassigning occurrences changes nothing
    seed = reassignment_stc(lists, owner, rng=np.random.default_rng(6), n_shuffles=400)
    assert abs(seed.ratio - 1.0) < 0.1 and seed.p_value > 0.01
    # dealing the rankings' entries scatters the shared popular concepts: above chance
    ranking = signal_to_chance(rankings, rng=np.random.default_rng(7), n_shuffles=400)
    assert ranking.ratio > 1.3 and ranking.p_value < 0.01
    # a rank structure shared by the models is agreement the reassignment does not reproduce
    ordered = planted(np.random.default_rng(8), ordered=True)
    lists2 = [ls for per in ordered for ls in per]
    res = reassignment_stc(lists2, owner, rng=np.random.default_rng(9), n_shuffles=400)
    assert res.ratio > 1.1 and res.p_value < 0.01


def test_summary_counts() -> None:
    def q(ratio: float, p: float, test_p: float) -> QuestionResult:
        stc = SignalToChance(observed=ratio, null_mean=1.0, ratio=ratio, p=p, null="ranking_shuffle")
        return question(
            stc_ranking_shuffle=stc, codebook_test=CodebookTest(chi2=1.0, cramers_v=0.1, p=test_p)
        )

    per_q = {"a": q(1.5, 0.01, 0.0005), "b": q(1.2, 0.2, 0.01), "c": q(0.9, 0.9, 0.2), "d": question()}
    assert null_counts(per_q, 0.05) == NullCounts(
        above_chance_ranking_shuffle=2,
        above_chance_significant_ranking_shuffle=1,
        n_codebook_test=3,
        codebook_reject=2,
        codebook_reject_001=1,
    )
