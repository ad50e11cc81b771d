"""rho_hat's bootstrap interval over prompts (studies/draws/bootstrap.py): against an
independent percentile bootstrap, against the exact two-prompt distribution, and as the
analysis records it per family."""

from __future__ import annotations

import numpy as np
import pytest
from draws_helpers import family

from lmaudit.studies.draws.analysis import analyze_records
from lmaudit.studies.draws.bootstrap import N_RESAMPLES, rho_hat_interval
from lmaudit.studies.draws.family import AnalysisParams, analyze_family
from lmaudit.studies.draws.importer import SequenceRecord
from lmaudit.studies.draws.sequences import encode, sequence_stats

SMALL = AnalysisParams(n_perm=99, rho_grid=(0.0, 0.25, 0.5), n_sims=20, power_rhos=(), seed=7)


def _stats(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    st = sequence_stats(encode(seqs))
    return (st.repeats - st.e0).astype(np.float64), st.room, st.informative


def test_the_interval_matches_an_independent_percentile_bootstrap() -> None:
    rng = np.random.default_rng(20261205)
    seqs = family(rng, 60, 12, 0.3)
    prompts = [f"p{i // 2:02d}" for i in range(60)]  # 30 prompts of two sequences each
    ex, room, inf = _stats(seqs)
    got = rho_hat_interval(ex, room, prompts, inf, np.random.default_rng(1))
    # by hand: per-prompt sums, prompts drawn with replacement, the 2.5% and 97.5% quantiles
    keys = sorted({p for p, i in zip(prompts, inf, strict=True) if i})
    t = np.array([ex[[j for j, p in enumerate(prompts) if p == k and inf[j]]].sum() for k in keys])
    r = np.array([room[[j for j, p in enumerate(prompts) if p == k and inf[j]]].sum() for k in keys])
    idx = np.random.default_rng(2).integers(0, len(keys), size=(20_000, len(keys)))
    ratios = t[idx].sum(axis=1) / r[idx].sum(axis=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    # Monte Carlo error of each end: about 0.0015 here (B = 9999 and 20,000); 0.006 is four of them
    assert got.low == pytest.approx(lo, abs=0.006) and got.high == pytest.approx(hi, abs=0.006)
    assert got.n_prompts == len(keys) and got.B == N_RESAMPLES and got.method == "percentile"
    assert got.low < t.sum() / r.sum() < got.high


def test_two_prompts_give_the_two_prompt_ratios_exactly() -> None:
    # resampling two prompts: each alone (probability 1/4 each) or both; the 2.5% and 97.5%
    # quantiles are the smaller and larger single-prompt ratio
    seqs = [[0, 0, 1, 1, 0, 1], [0, 1, 0, 1, 0, 1], [0, 0, 0, 1, 1, 1], [1, 0, 1, 1, 0, 0]]
    prompts = ["a", "a", "b", "b"]
    ex, room, inf = _stats(seqs)
    ra = (ex[0] + ex[1]) / (room[0] + room[1])
    rb = (ex[2] + ex[3]) / (room[2] + room[3])
    got = rho_hat_interval(ex, room, prompts, inf, np.random.default_rng(3))
    assert (got.low, got.high) == pytest.approx((min(ra, rb), max(ra, rb)), abs=1e-12)


def test_one_ratio_everywhere_is_a_point_and_one_prompt_has_no_interval() -> None:
    seqs = [[0, 0, 1, 1]] * 6  # every prompt the same sequence: every resample the same ratio
    ex, room, inf = _stats(seqs)
    got = rho_hat_interval(ex, room, list("abcdef"), inf, np.random.default_rng(4))
    ratio = ex[0] / room[0]
    assert (got.low, got.high) == pytest.approx((ratio, ratio), abs=1e-12)
    one = rho_hat_interval(ex, room, ["a"] * 6, inf, np.random.default_rng(4))
    assert one.low is None and one.high is None and one.n_prompts == 1 and "fewer than two" in one.reason


def test_prompts_without_an_informative_sequence_are_not_resampled() -> None:
    rng = np.random.default_rng(5)
    seqs = family(rng, 20, 10, 0.2)
    prompts = [f"p{i}" for i in range(20)]
    base = analyze_family("f", seqs, ["s"] * 20, SMALL, prompts).family.rho_hat_ci
    more = analyze_family(
        "f", [*seqs, [2] * 10, [1] * 10], ["s"] * 22, SMALL, [*prompts, "q1", "q2"]
    ).family.rho_hat_ci
    assert more == base  # one-answer sequences add nothing to either sum and are not drawn


def test_the_results_carry_the_interval_seeded_and_in_any_file_order() -> None:
    rng = np.random.default_rng(6)
    recs = [
        SequenceRecord("m", "s", "c", f"p{i % 15}", tuple(seq), i // 15)
        for i, seq in enumerate(family(rng, 45, 10, 0.3))
    ]
    res = analyze_records(recs, SMALL, exclude_patterns=[])
    ci = res.families["m"].rho_hat_ci
    rho_hat = res.families["m"].rho_hat
    assert ci.n_prompts == 15 and ci.interval is not None and rho_hat is not None
    assert ci.interval.contains(rho_hat)
    again = analyze_records(list(reversed(recs)), SMALL, exclude_patterns=[])
    assert again.families["m"].rho_hat_ci == ci  # prompts are resampled in sorted order
