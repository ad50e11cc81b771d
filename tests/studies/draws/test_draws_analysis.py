"""The registered analysis on planted data: validity, power, coverage, drift, the grouped diagnostic.

Monte Carlo tolerances are one-sided 99% binomial margins, ``2.33 * sqrt(q (1 - q) / N)``,
around the nominal rate ``q`` over ``N`` simulated datasets; every seed is fixed. Many small
datasets are analysed in one call by giving each its own *source*: per-source columns reuse the
family's joint permutations and synthetic datasets, and each column is exactly that dataset's
own test (its sequences shuffled or simulated independently of every other sequence).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import numpy as np
import pytest
from draws_helpers import FAST, family

from lmaudit.studies.draws import simulate
from lmaudit.studies.draws.family import AnalysisParams, analyze_family
from lmaudit.studies.draws.sequences import encode, sequence_stats
from lmaudit.studies.draws.simulate import draw_persistent, permutation_null, persistence_null


def _margin(q: float, n: int) -> float:
    return 2.33 * math.sqrt(q * (1 - q) / n)


def _many(
    rng: np.random.Generator, n_sets: int, n_seq: int, n: int, rho: float
) -> tuple[list[list[int]], list[str]]:
    seqs: list[list[int]] = []
    sources: list[str] = []
    for d in range(n_sets):
        seqs += family(rng, n_seq, n, rho)
        sources += [f"d{d:04d}"] * n_seq
    return seqs, sources


def test_pvalue_is_valid_under_independence() -> None:
    n_sets = 400
    seqs, sources = _many(np.random.default_rng(11), n_sets, 10, 8, 0.0)
    params = AnalysisParams(n_perm=99, rho_grid=(0.0, 0.5), n_sims=2, power_rhos=())
    res = analyze_family("iid", seqs, sources, params)
    p = np.array([c.pvalue for c in res.sources])
    assert p.size == n_sets and p.min() >= 1 / 100
    rate = float(np.mean(p <= 0.05))
    assert rate <= 0.05 + _margin(0.05, n_sets)
    assert rate >= 0.05 - 2 * _margin(0.05, n_sets)  # and not degenerate (p always 1 would pass above)


def test_persistence_is_detected_and_rho_hat_tracks_rho() -> None:
    rng = np.random.default_rng(3)
    fam = family(rng, 200, 20, 0.3)
    res = analyze_family("persistent", fam, ["s"] * 200, FAST).family
    assert res.pvalue == pytest.approx(1 / (FAST.n_perm + 1))  # nothing in the null reaches T
    assert res.rho_hat is not None and 0.2 < res.rho_hat < 0.35  # downward-biased estimate of 0.3
    assert res.rho_upper is not None and res.rho_upper >= 0.3


def test_power_rises_with_rho() -> None:
    rng = np.random.default_rng(5)
    res = analyze_family("f", family(rng, 40, 12, 0.0), ["s"] * 40, FAST).family
    pw = res.power
    tol = _margin(0.5, FAST.n_sims)
    assert pw[0.0] <= 0.05 + _margin(0.05, FAST.n_sims)  # size of the test at rho = 0
    assert pw[0.0] <= pw[0.05] + tol and pw[0.05] <= pw[0.1] + tol and pw[0.1] <= pw[0.3] + tol
    assert pw[0.3] > 0.9 and pw[0.3] > pw[0.05] + 0.3


@pytest.mark.parametrize(("rho", "n_seq", "n"), [(0.1, 25, 12), (0.3, 30, 20)])
def test_rho_upper_covers_the_true_rho(rho: float, n_seq: int, n: int) -> None:
    n_sets = 150
    seqs, sources = _many(np.random.default_rng(int(rho * 100)), n_sets, n_seq, n, rho)
    params = dataclasses.replace(FAST, n_perm=9, power_rhos=())
    res = analyze_family("f", seqs, sources, params)
    covered = [
        c.rho_upper_status == "uninformative" or (c.rho_upper is not None and c.rho_upper >= rho - 1e-9)
        for c in res.sources
    ]
    assert len(covered) == n_sets
    assert float(np.mean(covered)) >= 0.95 - _margin(0.05, n_sets)
    informative = [c for c in res.sources if c.rho_upper_status == "bounded"]
    assert len(informative) > n_sets // 2  # the bound is not vacuous


def test_drift_detects_a_planted_drift() -> None:
    rng = np.random.default_rng(8)
    res = analyze_family("f", family(rng, 40, 20, 0.0, drift=True), ["s"] * 40, FAST)
    assert res.family.drift_pvalue <= 0.01
    assert res.drift_robust.p <= 0.05


def test_drift_beyond_persistence_does_not_answer_to_persistence_alone() -> None:
    """The registered drift test rejects under persistence alone (D grows when runs fall unevenly
    into the halves; documented); the persistence-calibrated check keeps its level."""
    rng = np.random.default_rng(21)
    params = AnalysisParams(
        n_perm=99, rho_grid=tuple(round(0.05 * i, 2) for i in range(11)), n_sims=99, power_rhos=()
    )
    n_sets = 60
    registered, robust = [], []
    for _ in range(n_sets):
        res = analyze_family("f", family(rng, 30, 16, 0.4), ["s"] * 30, params)
        registered.append(res.family.drift_pvalue <= 0.05)
        robust.append(res.drift_robust.p <= 0.05)
    assert float(np.mean(robust)) <= 0.05 + _margin(0.05, n_sets)
    assert float(np.mean(registered)) > 0.5


def test_grouped_diagnostic_flags_rebuilt_sequences_only() -> None:
    rng = np.random.default_rng(13)
    honest = family(rng, 40, 10, 0.0)
    rebuilt = [sorted(s) for s in family(rng, 12, 10, 0.0)]  # AAABBB: rebuilt from counts
    res = analyze_family("f", honest + rebuilt, ["honest"] * 40 + ["rebuilt"] * 12, FAST)
    flags = {g.source: g for g in res.grouped}
    assert flags["rebuilt"].flagged and flags["rebuilt"].pvalue < 1e-6
    assert not flags["honest"].flagged
    assert res.without_flagged is not None and res.without_flagged.n_sequences == 40
    assert res.family.pvalue < 0.01  # grouping looks like persistence ...
    assert res.without_flagged.pvalue > 0.05  # ... and is gone without the flagged source


def test_grouped_diagnostic_rarely_flags_honest_sources() -> None:
    seqs, sources = _many(np.random.default_rng(17), 300, 10, 10, 0.0)
    res = analyze_family(
        "f", seqs, sources, AnalysisParams(n_perm=9, rho_grid=(0.0, 0.5), n_sims=2, power_rhos=())
    )
    assert sum(g.flagged for g in res.grouped) <= 2  # expected at most 0.3 at p < 0.001


def test_uninformative_sequences_add_nothing() -> None:
    rng = np.random.default_rng(2)
    fam = family(rng, 20, 10, 0.0)
    res = analyze_family("f", fam, ["s"] * 20, FAST).family
    res2 = analyze_family("f", [*fam, [1] * 10, [2] * 7], ["s"] * 22, FAST).family
    assert res2.n_informative == res.n_informative and res2.n_sequences == res.n_sequences + 2
    assert res2.statistic == pytest.approx(res.statistic) and res2.rho_hat == pytest.approx(res.rho_hat)
    assert res2.pvalue == res.pvalue  # same streams: the constant sequences are not permuted


def test_no_informative_sequence_gives_an_uninformative_bound() -> None:
    res = analyze_family("f", [[1] * 5, [2] * 9], ["s", "s"], FAST).family
    assert res.statistic == 0 and res.pvalue == 1.0 and res.rho_hat is None
    assert (
        res.rho_upper is None and res.rho_upper_status == "uninformative" and res.rho_upper_label == "> 0.50"
    )


def test_a_source_without_informative_sequences_is_reported() -> None:
    fam = family(np.random.default_rng(6), 10, 8, 0.0)
    res = analyze_family("f", [*fam, [3] * 8, [4] * 6], ["a"] * 10 + ["z", "z"], FAST)
    z = res.sources[1]
    assert z.name == "z" and z.n_sequences == 2 and z.n_informative == 0 and z.pvalue == 1.0
    assert res.family.statistic == pytest.approx(res.sources[0].statistic)


def test_results_are_reproducible_and_streams_depend_on_the_family_name() -> None:
    rng = np.random.default_rng(4)
    fam = family(rng, 20, 10, 0.2)
    a = analyze_family("f", fam, ["s"] * 20, FAST).family
    b = analyze_family("f", fam, ["s"] * 20, FAST).family
    c = analyze_family("g", fam, ["s"] * 20, FAST).family
    assert np.array_equal(a.null_repeats, b.null_repeats) and np.array_equal(a.share_le, b.share_le)
    assert not np.array_equal(a.null_repeats, c.null_repeats)


# ---------------------------------------------------------------- engines vs plain Python


def test_permutation_engine_matches_plain_python_loop() -> None:
    rng = np.random.default_rng(9)
    seqs = family(rng, 15, 9, 0.0) + family(rng, 5, 4, 0.0)  # two lengths
    sset = encode(seqs)
    stats = sequence_stats(sset)
    b = 4000
    r, d = permutation_null(sset, n_perm=b, rng=np.random.default_rng(1))
    py = random.Random(1)
    naive = []
    for _ in range(b):
        tot = 0
        for s in seqs:
            x = list(s)
            py.shuffle(x)
            tot += sum(u == v for u, v in itertools.pairwise(x))
        naive.append(tot)
    e0 = float(stats.e0.sum())
    se = float(np.std(naive)) / math.sqrt(b)
    assert abs(float(r[:, 0].mean()) - e0) < 4 * se  # E0 is the exact mean
    assert abs(float(np.mean(naive)) - e0) < 4 * se
    assert float(r[:, 0].std()) == pytest.approx(float(np.std(naive)), rel=0.08)
    assert abs(float(d[:, 0].mean()) - float(stats.drift_e0.sum())) < 4 * float(d[:, 0].std()) / math.sqrt(b)


def test_persistence_engine_matches_a_sequential_simulation() -> None:
    rng = np.random.default_rng(10)
    seqs = family(rng, 12, 10, 0.0)
    sset = encode(seqs)
    n_sims = 1500
    t, _ = persistence_null(sset, [0.0, 0.35], n_sims=n_sims, rng=np.random.default_rng(2))
    # plain sequential version: fresh draws from each sequence's observed shares
    py = np.random.default_rng(3)
    shares = [np.unique(s, return_counts=True)[1] / len(s) for s in seqs]
    naive = np.zeros(n_sims)
    for s, p in zip(seqs, shares, strict=True):
        xs = draw_persistent(p, [len(s)] * n_sims, 0.35, rng=py)
        naive += [
            float(np.sum(x[1:] == x[:-1])) - float((np.bincount(x) ** 2).sum() - len(s)) / len(s) for x in xs
        ]
    se0 = float(t[0, :, 0].std()) / math.sqrt(n_sims)
    assert abs(float(t[0, :, 0].mean())) < 4 * se0  # iid from any shares is exchangeable: E[T] = 0
    se = float(np.std(naive)) / math.sqrt(n_sims)
    assert abs(float(t[1, :, 0].mean()) - float(np.mean(naive))) < 4 * math.sqrt(2) * se
    assert float(t[1, :, 0].std()) == pytest.approx(float(np.std(naive)), rel=0.1)


def test_a_chunk_of_one_permutation_is_shuffled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk of one permutation (B = 1, or a last chunk when B = 1 modulo the chunk size, as
    B = 10,000 is for some large families) is a fresh array too: the shuffle may write to it."""
    seqs = family(np.random.default_rng(4), 30, 12, 0.2)
    sset = encode(seqs)
    r, d = permutation_null(sset, n_perm=1, rng=np.random.default_rng(5))
    assert r.shape == d.shape == (1, 1) and 0 <= r[0, 0] <= 30 * 11
    monkeypatch.setattr(simulate, "CHUNK_ELEMS", 2 * 30 * 12)  # chunks of 2, 2 and 1 permutations
    r, _ = permutation_null(sset, n_perm=5, rng=np.random.default_rng(5))
    assert r.shape == (5, 1) and (r >= 0).all() and (r <= 30 * 11).all()
