"""RBO_ext against references written here from Webber, Moffat & Zobel (2010), a hand-worked
value, the PyPI ``rbo`` package where it is right, and the vectorised routine against the scalar.

References (independent of ``lmaudit.stats.rbo``):

* :func:`ref_eq32`: eq. (32) term by term, prefixes as Python sets (strict rankings);
* :func:`ref_ties`: every item gets the depth at which its tie group enters a prefix (the
  group's first position); prefix sizes and overlaps are counted from those depths, and the
  agreement is eq. (28), extended past the shorter list as documented in the module.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmaudit.stats.rbo import encode_lists, rbo_all_pairs, rbo_ext, shuffle_assignments, tie_groups

TOL = 1e-12


def ref_eq32(S: list, L: list, p: float) -> float:
    if len(S) > len(L):
        S, L = L, S
    s, l = len(S), len(L)  # noqa: E741 (Webber's notation)

    def X(d: int) -> int:
        return len(set(S[:d]) & set(L[:d]))

    head = sum(X(d) / d * p**d for d in range(1, l + 1))
    tail = sum(X(s) * (d - s) / (s * d) * p**d for d in range(s + 1, l + 1))
    return (1 - p) / p * (head + tail) + ((X(l) - X(s)) / l + X(s) / s) * p**l


def ref_ties(S: list[set], L: list[set], p: float) -> float:
    def entry(groups: list[set]) -> dict:
        out, pos = {}, 1
        for g in groups:
            for item in g:
                out[item] = pos
            pos += len(g)
        return out

    es, el = entry(S), entry(L)
    if len(es) > len(el):
        es, el = el, es
    s, l = len(es), len(el)  # noqa: E741 (Webber's notation)
    total, a_s, a = 0.0, 0.0, 0.0
    for d in range(1, l + 1):
        sd = {i for i, e in es.items() if e <= d}
        ld = {i for i, e in el.items() if e <= d}
        x = len(sd & ld)
        if d <= s:
            a = 2 * x / (len(sd) + len(ld))
            a_s = a if d == s else a_s
        else:
            a = 2 * (x + (d - s) * a_s) / (d + len(ld))
        total += (1 - p) * p ** (d - 1) * a
    return total + a * p**l


def random_ranking(rng: random.Random, n: int, pool: int) -> list[int]:
    return rng.sample(range(pool), n)


def test_hand_worked_value() -> None:
    # S = a b c, T = b a d, p = 0.9: X = 0, 2, 2 so A = 0, 1, 2/3;
    # RBO_ext = 0.1 (0 + 0.9 * 1 + 0.81 * 2/3) + (2/3) 0.9^3 = 0.144 + 0.486 = 0.63
    assert rbo_ext("abc", "bad") == pytest.approx(0.63, abs=TOL)
    # the shorter list is a prefix of the longer: eq. (32) extrapolates perfect agreement
    assert rbo_ext([1, 2, 3], [1, 2, 3, 4, 5]) == pytest.approx(1.0, abs=TOL)


@pytest.mark.parametrize("p", [0.5, 0.9, 0.98])
def test_random_strict_rankings_match_eq32(p: float) -> None:
    rng = random.Random(7)
    for _ in range(300):
        a = random_ranking(rng, rng.randint(1, 25), 40)
        b = random_ranking(rng, rng.randint(1, 25), 40)
        assert rbo_ext(a, b, p) == pytest.approx(ref_eq32(a, b, p), abs=TOL)
        assert rbo_ext(a, b, p) == pytest.approx(rbo_ext(b, a, p), abs=TOL)


def test_edge_cases() -> None:
    assert math.isnan(rbo_ext([], []))
    assert rbo_ext([], ["a"]) == 0.0 and rbo_ext(["a"], []) == 0.0
    assert rbo_ext("abcdef", "abcdef") == pytest.approx(1.0, abs=TOL)
    assert rbo_ext("abcdef", "uvwxyz") == 0.0
    assert rbo_ext("abc", "uvwxyz") == 0.0
    for a, b in [("abcd", "dcba"), ("a", "ab"), ("ab", "ba"), ("abcdefgh", "xbz")]:
        assert rbo_ext(a, b) == pytest.approx(ref_eq32(list(a), list(b), 0.9), abs=TOL)
    with pytest.raises(ValueError, match="p must lie"):
        rbo_ext("a", "a", p=1.0)


def test_duplicates_count_once_at_first_position() -> None:
    assert tie_groups(["a", "b", "a", "c"]) == [frozenset("a"), frozenset("b"), frozenset("c")]
    assert rbo_ext(["a", "b", "a", "c"], ["a", "b", "c"]) == pytest.approx(1.0, abs=TOL)
    assert rbo_ext(["a", "b", "a", "c"], "bca") == pytest.approx(
        ref_eq32(list("abc"), list("bca"), 0.9), abs=TOL
    )


def test_ties_as_sets_of_equal_rank() -> None:
    # singleton groups are strict rankings
    assert rbo_ext([{"a"}, {"b"}, {"c"}], "bad") == pytest.approx(rbo_ext("abc", "bad"), abs=TOL)
    # [{a, b}, c] vs [b, a, c]: A_1 = 2 * 1 / (2 + 1), then full agreement
    expected = 0.1 * (2 / 3 + 0.9 + 0.81) + 0.729
    assert rbo_ext([{"a", "b"}, "c"], "bac") == pytest.approx(expected, abs=TOL)
    assert rbo_ext([{"a", "b"}, "c"], [{"b", "a"}, "c"]) == pytest.approx(1.0, abs=TOL)
    rng = random.Random(11)
    for _ in range(300):
        lists = []
        for _side in range(2):
            items = random_ranking(rng, rng.randint(1, 15), 25)
            groups, i = [], 0
            while i < len(items):
                k = rng.choice([1, 1, 1, 2, 3])
                groups.append(set(items[i : i + k]))
                i += k
            lists.append(groups)
        got = rbo_ext(lists[0], lists[1], 0.9)
        assert got == pytest.approx(ref_ties(lists[0], lists[1], 0.9), abs=TOL)
        assert 0.0 <= got <= 1.0


def test_agrees_with_pypi_rbo_on_strict_nonempty_rankings() -> None:
    try:
        import rbo as pypi_rbo
    except ImportError:  # pragma: no cover - the install step provides it
        pytest.fail("the PyPI rbo package is missing: pip install --no-deps rbo==0.1.3")
    rng = random.Random(3)
    for _ in range(300):
        a = random_ranking(rng, rng.randint(1, 25), 35)
        b = random_ranking(rng, rng.randint(1, 25), 35)
        theirs = pypi_rbo.RankingSimilarity(a, b).rbo_ext(p=0.9)
        assert rbo_ext(a, b, 0.9) == pytest.approx(theirs, abs=1e-12)
    # where we differ on purpose: two empty lists (theirs 1, ours NaN) and repeated items
    assert pypi_rbo.RankingSimilarity([], []).rbo_ext(p=0.9) == 1
    with pytest.raises(AssertionError):
        pypi_rbo.RankingSimilarity(["a", "a"], ["a"])


def test_vectorised_matches_scalar_for_all_pairs_and_batches() -> None:
    rng = random.Random(5)
    batches = []
    for _ in range(20):
        lists = [random_ranking(rng, rng.randint(0, 20), 30) for _ in range(6)]
        lists[rng.randrange(6)] = []  # always one empty list
        batches.append(lists)
    width = 20
    ids = np.full((len(batches), 6, width), -1, dtype=np.int64)
    for b, lists in enumerate(batches):
        for m, lst in enumerate(lists):
            ids[b, m, : len(lst)] = lst
    got = rbo_all_pairs(ids, 0.9)
    ii, jj = np.triu_indices(6, 1)
    assert got.shape == (len(batches), ii.size)
    for b, lists in enumerate(batches):
        for k, (i, j) in enumerate(zip(ii, jj, strict=True)):
            want = rbo_ext(lists[i], lists[j], 0.9)
            if math.isnan(want):
                assert math.isnan(got[b, k])
            else:
                assert got[b, k] == pytest.approx(want, abs=TOL)


def test_encode_lists() -> None:
    enc = encode_lists([["x", "y", "x"], ["z"], []])
    assert enc.vocab == ("x", "y", "z")
    assert enc.ids.tolist() == [[0, 1], [2, -1], [-1, -1]]
    assert enc.lengths.tolist() == [2, 1, 0]
    assert encode_lists([["a", "b", "c"]], depth=2).ids.tolist() == [[0, 1]]
    assert enc.starts is None
    tied = encode_lists([["c", {"b", "a"}, "d"], ["a"]], depth=2)  # a tie group is never split
    assert tied.ids.tolist() == [[0, 1, 2], [1, -1, -1]]
    assert tied.starts is not None and tied.starts.tolist()[0] == [1, 2, 2]
    got = rbo_all_pairs(enc.ids)
    assert got[0] == 0.0 and got[1] == 0.0 and got[2] == 0.0
    with pytest.raises(ValueError, match="repeats an id"):
        rbo_all_pairs(np.array([[1, 2, 1], [1, 2, 3]]))
    with pytest.raises(ValueError, match="after its end"):
        rbo_all_pairs(np.array([[1, -1, 2], [1, 2, 3]]))


def test_shuffle_assignments() -> None:
    ids = encode_lists([list("abcde"), list("fgh"), list("ij")]).ids
    draws = shuffle_assignments(ids, 200, rng=np.random.default_rng(0))
    assert draws.shape == (200, 3, 5)
    # distinct pooled ids: each draw is a permutation of them, lengths kept
    for d in draws:
        assert sorted(d[d >= 0].tolist()) == list(range(10))
        assert (d >= 0).sum(axis=-1).tolist() == [5, 3, 2]
    again = shuffle_assignments(ids, 200, rng=np.random.default_rng(0))
    assert np.array_equal(draws, again)
    # shared concepts: no list is dealt a concept twice, and lengths are kept when that is possible
    # (here a, b and c must land in every list, once each)
    shared = encode_lists([list("abcd"), list("abce"), list("abcf")]).ids
    draws = shuffle_assignments(shared, 300, rng=np.random.default_rng(1))
    assert ((draws >= 0).sum(axis=-1) == 4).all()
    for d in draws:
        assert all({0, 1, 2} <= set(row.tolist()) for row in d)
        assert sorted(d.ravel().tolist()) == sorted(shared.ravel().tolist())
    # impossible to place: 'a' pooled three times over two lists, so one copy is dropped
    tight = encode_lists([list("ab"), list("ac"), list("ad")]).ids[:2]
    assert ((shuffle_assignments(tight, 5, rng=np.random.default_rng(2)) >= 0).sum(axis=-1) == 2).all()
    # rows stay left-packed and repeat-free
    draws = shuffle_assignments(np.array([[0, 1], [0, 2]]), 50, rng=np.random.default_rng(4))
    for d in draws:
        for row in d:
            kept = row[row >= 0].tolist()
            assert len(kept) == len(set(kept)) and (row[len(kept) :] == -1).all()


def _conditional_law(lists: list[str]) -> dict[tuple[tuple[int, ...], ...], float]:
    """Enumerate the uniform permutation of the pooled entries conditioned on no repeats."""
    ids = encode_lists([list(x) for x in lists]).ids
    pool = [int(x) for x in ids.ravel() if x >= 0]
    lengths = [len(x) for x in lists]
    cuts = np.cumsum([0, *lengths])
    law: dict[tuple[tuple[int, ...], ...], float] = {}
    for perm in itertools.permutations(pool):
        rows = tuple(perm[cuts[i] : cuts[i + 1]] for i in range(len(lists)))
        if all(len(set(r)) == len(r) for r in rows):
            law[rows] = law.get(rows, 0) + 1
    total = sum(law.values())
    return {k: v / total for k, v in law.items()}


def test_shuffles_follow_the_conditional_law_of_a_uniform_permutation() -> None:
    """The null is a uniform permutation conditioned on no list holding a concept twice: on a
    small case with shared concepts, the law is enumerated and the draws are compared with a
    chi-square goodness-of-fit test (fixed seed; p > 0.01). The deal alone (no swap sweeps)
    is biased here, which the same test detects: the chain is what makes the law exact."""
    from scipy.stats import chisquare

    lists = ["abc", "abd", "ae"]
    law = _conditional_law(lists)
    ids = encode_lists([list(x) for x in lists]).ids
    n = 100_000

    def fit(sweeps: float, seed: int) -> float:
        draws = shuffle_assignments(ids, n, rng=np.random.default_rng(seed), sweeps=sweeps)
        seen: dict[tuple[tuple[int, ...], ...], int] = {}
        for d in draws:
            key = tuple(tuple(int(v) for v in row if v >= 0) for row in d)
            assert key in law, key  # never a state outside the support
            seen[key] = seen.get(key, 0) + 1
        keys = sorted(law)
        return float(chisquare([seen.get(k, 0) for k in keys], [n * law[k] for k in keys]).pvalue)

    assert fit(8.0, 11) > 0.01
    assert fit(0.0, 11) < 1e-6


def test_default_null_mean_equals_a_long_chain() -> None:
    """On realistic lists (9 models x 40 concepts from a 60-concept Zipf pool, many shared),
    the null mean RBO of the default sweeps equals that of a 16-sweep chain within four
    standard errors."""
    rng = np.random.default_rng(5)
    weights = 1.0 / np.arange(1, 61) ** 0.8
    lists = [list(rng.choice(60, size=40, replace=False, p=weights / weights.sum())) for _ in range(9)]
    ids = encode_lists(lists).ids
    a = np.nanmean(rbo_all_pairs(shuffle_assignments(ids, 3000, rng=np.random.default_rng(1))), axis=-1)
    b = np.nanmean(
        rbo_all_pairs(shuffle_assignments(ids, 3000, rng=np.random.default_rng(2), sweeps=16.0)), axis=-1
    )
    se = np.sqrt(a.var() / a.size + b.var() / b.size)
    assert abs(a.mean() - b.mean()) < 4 * se


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 30), max_size=20, unique=True),
    st.lists(st.integers(0, 30), max_size=20, unique=True),
    st.sampled_from([0.5, 0.9, 0.98]),
)
def test_invariants(a: list[int], b: list[int], p: float) -> None:
    got = rbo_ext(a, b, p)
    if not a and not b:
        assert math.isnan(got)
        return
    assert 0.0 <= got <= 1.0
    assert got == pytest.approx(rbo_ext(b, a, p), abs=TOL)
    if a and b:
        assert got == pytest.approx(ref_eq32(a, b, p), abs=TOL)
    enc = encode_lists([a, b])
    assert rbo_all_pairs(enc.ids, p)[0] == pytest.approx(got, abs=TOL)
