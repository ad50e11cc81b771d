"""The ``persistent`` sim sampler: the Sampling contract, determinism, and its known persistence."""

from __future__ import annotations

import numpy as np
import pytest

from lmaudit.backends.base import SampleRequest, SamplingBackend, identity_digest
from lmaudit.backends.sim import build_sim_agent
from lmaudit.studies.draws.sequences import encode, sequence_stats

MSG = ({"role": "user", "content": "Name a color."},)


def _req(seed: int, n: int = 20, probe: str = "color") -> SampleRequest:
    return SampleRequest(MSG, n=n, temperature=0.7, seed=seed, meta={"probe": probe})


def test_contract_and_prefix_property() -> None:
    s = build_sim_agent({"agent": "persistent", "rho": 0.4})
    assert isinstance(s, SamplingBackend) and s.reads_meta
    long = s.sample([_req(5, 30)])[0].texts
    short = s.sample([_req(5, 7)])[0].texts
    assert short == long[:7] and len(long) == 30  # draw i does not depend on n (cache per draw is valid)
    assert s.sample([_req(5, 30)])[0].texts == long
    assert s.sample([_req(6, 30)])[0].texts != long
    assert set(long) <= {"red", "green", "blue", "yellow"}


def test_identity_covers_every_parameter() -> None:
    base = {"agent": "persistent"}
    variants = [
        {},
        {"rho": 0.1},
        {"seed": 1},
        {"answers": ["a", "b"]},
        {"shares": [1, 1, 1, 2]},
        {"drift_to": [1, 0, 0, 0]},
        {"drift_horizon": 5},
    ]
    digests = {identity_digest(build_sim_agent({**base, **v}).identity) for v in variants}
    assert len(digests) == len(variants)


def test_extremes_and_estimated_persistence() -> None:
    one = build_sim_agent({"agent": "persistent", "rho": 1.0})
    assert len(set(one.sample([_req(1)])[0].texts)) == 1
    rho = 0.3
    s = build_sim_agent({"agent": "persistent", "rho": rho, "shares": [0.4, 0.3, 0.2, 0.1]})
    seqs = [r.texts for r in s.sample([_req(i, 40) for i in range(400)])]
    st = sequence_stats(encode(seqs))
    # P(repeat) = rho + (1 - rho) sum p^2 with fixed shares: an unbiased check of rho (4 SE)
    sum_p2 = 0.16 + 0.09 + 0.04 + 0.01
    rate = st.repeats.sum() / (st.n - 1).sum()
    se = np.sqrt(rate * (1 - rate) / (st.n - 1).sum() * (1 + 2 * rho))  # inflated for dependence
    assert abs(rate - (rho + (1 - rho) * sum_p2)) < 4 * se


def test_drift_moves_the_shares() -> None:
    s = build_sim_agent(
        {
            "agent": "persistent",
            "rho": 0.0,
            "answers": ["a", "b"],
            "shares": [1, 0],
            "drift_to": [0, 1],
            "drift_horizon": 10,
        }
    )
    texts = s.sample([_req(3, 30)])[0].texts
    assert texts[0] == "a" and texts[9:] == ["b"] * 21


def test_per_probe_shares_differ_and_are_reproducible() -> None:
    s = build_sim_agent({"agent": "persistent", "seed": 4})
    assert s.base_shares("color") == s.base_shares("color") != s.base_shares("number")
    assert sum(s.base_shares("color")) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"rho": 1.5}, "'rho'"),
        ({"answers": ["a", "a"]}, "'answers'"),
        ({"shares": [1, 2]}, "'shares'"),
        ({"shares": [0, 0, 0, 0]}, "'shares' must not sum to 0"),
        ({"drift_horizon": 1}, "'drift_horizon'"),
        ({"temperature": 1}, "unknown field"),
    ],
)
def test_bad_fields_are_named(fields: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_sim_agent({"agent": "persistent", **fields})
