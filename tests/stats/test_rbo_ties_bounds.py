"""Vectorised RBO with tie groups against the scalar tie reference, two empty lists, and
Webber's bounds against closed forms and against rankings built to reach each bound."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from test_rbo import ref_ties

from lmaudit.stats.rbo import encode_lists, rbo_all_pairs, rbo_ext
from lmaudit.stats.rbo.bounds import rbo_bounds

TOL = 1e-12


def _groups(rng: random.Random, items: list[int]) -> list[set[int]]:
    out, k = [], 0
    while k < len(items):
        g = rng.choice([1, 1, 2, 3])
        out.append(set(items[k : k + g]))
        k += g
    return out


def test_all_pairs_with_tie_groups_matches_the_tie_reference() -> None:
    rng = random.Random(3)
    for _ in range(150):
        lists = [_groups(rng, rng.sample(range(14), rng.randint(1, 10))) for _ in range(4)]
        enc = encode_lists(lists)
        got = rbo_all_pairs(enc.ids, 0.9, enc.starts)
        ii, jj = np.triu_indices(4, 1)
        for k, (i, j) in enumerate(zip(ii, jj, strict=True)):
            assert got[k] == pytest.approx(ref_ties(lists[i], lists[j], 0.9), abs=TOL)
    # a batch axis and broadcast starts
    enc = encode_lists([[{"a", "b"}, "c"], ["b", "a", "c"], ["c", "d"]])
    batch = np.stack([enc.ids, enc.ids])
    assert np.allclose(rbo_all_pairs(batch, 0.9, enc.starts[None]), rbo_all_pairs(enc.ids, 0.9, enc.starts))
    # hand-worked: {a b} c against b a c: S:1 = {a, b}, L:1 = {b}, A_1 = 2*1/(2+1); A_2 = A_3 = 1
    want = 0.1 * (2 / 3 + 0.9 * 1.0 + 0.81 * 1.0) + 1.0 * 0.9**3
    assert rbo_all_pairs(enc.ids, 0.9, enc.starts)[0] == pytest.approx(want, abs=TOL)
    with pytest.raises(ValueError, match="starts"):
        rbo_all_pairs(np.array([[0, 1], [1, 0]]), 0.9, np.array([[1, 1], [2, 2]]))


def test_two_empty_lists_are_nan_not_an_error() -> None:
    got = rbo_all_pairs(np.full((2, 0), -1), 0.9)
    assert got.shape == (1,) and math.isnan(got[0])
    got = rbo_all_pairs(np.full((5, 3, 0), -1), 0.9)
    assert got.shape == (5, 3) and np.isnan(got).all()
    assert math.isnan(rbo_ext([], []))


def _rbo_to_depth(a: list, b: list, p: float, depth: int) -> float:
    """RBO truncated at ``depth`` (eq. 7) by sets, for rankings at least that deep."""
    return (1 - p) * sum(p ** (d - 1) * len(set(a[:d]) & set(b[:d])) / d for d in range(1, depth + 1))


def _reach(short: list, long_: list, extra: int) -> tuple[list, list, list, list]:
    """Continuations of two prefixes that reach RBO_min (nothing more matches) and RBO_max
    (the shorter list takes the longer's unmatched items in order, the longer the shorter's,
    then both share the same fresh items)."""
    lo_a = short + [("s", k) for k in range(extra)]
    lo_b = long_ + [("l", k) for k in range(extra)]
    hi_a = short + [x for x in long_ if x not in short]
    hi_b = long_ + [x for x in short if x not in long_]
    fresh = [("f", k) for k in range(extra)]
    return lo_a, lo_b, (hi_a + fresh)[: len(lo_a)], (hi_b + fresh)[: len(lo_b)]


def test_bounds_closed_forms() -> None:
    p = 0.9
    # identical prefixes of length k: the maximum is 1
    b = rbo_bounds(list("abcd"), list("abcd"), p)
    assert b.max == pytest.approx(1.0, abs=TOL) and b.min + b.residual == pytest.approx(b.max, abs=TOL)
    # eq. 11 for identical prefixes: (1-p)/p [sum_{d<=k} (d-k)/d p^d - k ln(1-p)]
    k = 4
    want = (1 - p) / p * (sum((d - k) / d * p**d for d in range(1, k + 1)) - k * math.log(1 - p))
    assert b.min == pytest.approx(want, abs=TOL)
    # disjoint single items: nothing seen agrees (min 0); at best all deeper items do (max p)
    one = rbo_bounds(["a"], ["b"], p)
    assert one.min == 0.0 and one.max == pytest.approx(p, abs=TOL)
    assert math.isnan(rbo_bounds([], [], p).min)
    e = rbo_bounds([], ["a", "b"], p)
    assert e.min == 0.0 and e.max == pytest.approx(1.0, abs=TOL)


def test_bounds_are_reached_and_hold_rbo_ext() -> None:
    rng = random.Random(11)
    p, depth = 0.9, 600  # p**600 < 1e-27: the truncation is below the tolerance
    for _ in range(60):
        pool = list(range(25))
        a = rng.sample(pool, rng.randint(1, 12))
        b = rng.sample(pool, rng.randint(1, 12))
        short, long_ = (a, b) if len(a) <= len(b) else (b, a)
        lo_a, lo_b, hi_a, hi_b = _reach(short, long_, depth)
        got = rbo_bounds(a, b, p)
        assert got.min == pytest.approx(_rbo_to_depth(lo_a, lo_b, p, depth), abs=1e-10)
        assert got.max == pytest.approx(_rbo_to_depth(hi_a, hi_b, p, depth), abs=1e-10)
        assert got.min - 1e-12 <= rbo_ext(a, b, p) <= got.max + 1e-12
        assert got.residual == pytest.approx(got.max - got.min, abs=TOL)
    with pytest.raises(ValueError, match="strict"):
        rbo_bounds([{"a", "b"}], ["a"], p)
