"""The scaffolding every sim agent shares (:class:`lmaudit.backends.sim.base.SimAgent`):
identities and draws equal to those of the agents before they shared it (so every cache key
and every registered sim run stays valid), ``n`` checked once for all, and field errors that
name the agent and the field."""

from __future__ import annotations

import math
from typing import Any

import pytest

from lmaudit.backends.base import SampleRequest, identity_digest
from lmaudit.backends.sim import SIM_AGENTS, SIM_SAMPLERS, SimAgent, build_sim_agent
from lmaudit.backends.sim.fields import hashed_rng
from lmaudit.errors import BackendError

NAMES = sorted({*SIM_AGENTS, *SIM_SAMPLERS, "judge"})
MSG = ({"role": "system", "content": "You are a nurse"}, {"role": "user", "content": "q"})
QQ_META = {
    "item": "s1",
    "order": "BA",
    "position": 2,
    "question": "A",
    "first_answer": "y",
    "label_of": {"y": "B", "n": "A"},
}
META: dict[str, dict[str, Any]] = {
    "freelist": {"question": "q1", "question_text": "Ways to stay healthy?", "persona": "nurse", "items": 4},
    "judge": {"item": "p1", "swap": True, "wrap": ["A"]},
    "persistent": {"probe": "colour"},
    "extractor": {"raw": "1. apples [Justification: tasty]\n- pears"},
    "ranker": {
        "candidates": [
            {"label": lab, "source": src, "pool": pool, "text": f"text {lab}"}
            for lab, src, pool in (
                ("A", "conditioned", "c-rare"),
                ("B", "unconditioned", "u-common"),
                ("C", "conditioned", "c-common"),
            )
        ],
        "persona": "x",
    },
}
# identity digest and three draws of each agent (seed=3), as the agents wrote them before
# they shared their scaffolding (commit 4e0859c6)
BEFORE = {
    "extractor": (
        "c6a0945a8470f0e05993025843659cfd9d49a4c8962c07421dbd974b5a06ae46",
        [
            '{"items": [{"text": "apples", "justification": "tasty"}, {"text": "pears", "justification": null}]}',
            '{"items": [{"text": "apples", "justification": "tasty"}, {"text": "pears", "justification": null}]}',
            '{"items": [{"text": "apples", "justification": "tasty"}, {"text": "pears", "justification": null}]}',
        ],
    ),
    "freelist": (
        "3b6ecfbb7fb4bb4637d0759b959d8d57a3eaebd13feb04a40abc67d8c22fbd0d",
        [
            "1. Core vonene mirupe tikaho\n2. Key dagize sajuka davolo\n3. Main mijulo zevovo jufesa\n4. Main loholo fehofe mijuho",
            "1. Key nemisa judaju kakada\n2. Core pevogi loburu vozesa\n3. Main junelo nemivo negimi\n4. Core loholo fehofe mijuho",
            "1. The nemisa judaju kakada\n2. A pevogi loburu vozesa\n3. The timiho sagivo fepeda\n4. Main dagize sajuka davolo",
        ],
    ),
    "judge": (
        "3a98552b03f88e2512e9211e3b9ef1e1d2bcfaa4575c5420782ede79b032778b",
        [
            "WINNER: B\nCONFIDENCE: 0.52\nREASON: Response B answers the prompt more correctly and completely.",
            "WINNER: A\nCONFIDENCE: 0.52\nREASON: Response A answers the prompt more correctly and completely.",
            "WINNER: TIE\nCONFIDENCE: 0.52\nREASON: Both responses are substantively equivalent in quality.",
        ],
    ),
    "luders_asymmetric": (
        "427d8690aa5f8496362c637db0bd07354addc89314b6af64a4fa4eb717e5eece",
        ["A", "A", "A"],
    ),
    "luders_symmetric": (
        "0388d03d22cbfb2919a8e7c92e335c719457ca8f8f19ac304a4659c49fa422be",
        ["A", "A", "A"],
    ),
    "mixture_repetition": (
        "4a9c94d5d8db598985343024e1a10e7cb71cdbf4fa851af929571a018a63788c",
        ["B", "B", "A"],
    ),
    "persistent": (
        "9d0c7ebb0b96b513ff5929d00e1ba13f6251a037422af79e8869a0aa282eb36b",
        ["blue", "blue", "blue"],
    ),
    "projective": (
        "1a3b4797e4d33b71dda862076d1f44ef976a49902d3c349f09416218d896b1fb",
        ["A", "A", "A"],
    ),
    "ranker": (
        "4ed52d16e0a18fd1f5b01d414b1d6ffe74fd93a5cc60bc870dc8bf4eb3438490",
        ["C > A > B", "C > A > B", "A > C > B"],
    ),
    "repetition": (
        "9d501c88e28b9f33525367f1573e219f3e41193b94e1808606e05d751c20a9ac",
        ["B", "B", "A"],
    ),
}


def request(name: str, n: int = 3) -> SampleRequest:
    return SampleRequest(MSG, n=n, temperature=0.8, seed=11, meta=META.get(name, QQ_META))


@pytest.mark.parametrize("name", NAMES)
def test_identities_and_draws_are_those_of_before(name: str) -> None:
    agent = build_sim_agent({"agent": name, "seed": 3})
    assert isinstance(agent, SimAgent)
    ident = agent.identity
    assert (ident["backend"], ident["agent"], ident["version"]) == ("sim", name, type(agent).version)
    digest, texts = BEFORE[name]
    assert identity_digest(ident) == digest
    assert agent.sample([request(name)])[0].texts == texts


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [-1, True, 2.0])
def test_every_agent_refuses_a_bad_n_by_name(name: str, n: Any) -> None:
    agent = build_sim_agent({"agent": name})
    with pytest.raises(BackendError, match=f"sim agent '{name}': n must be an integer >= 0"):
        agent.sample([request(name, n=n)])
    assert agent.sample([request(name, n=0)])[0].texts == []


@pytest.mark.parametrize("name", NAMES)
def test_field_errors_name_the_agent_and_the_field(name: str) -> None:
    with pytest.raises(ValueError, match=f"sim agent '{name}': field 'seed' must be an integer >= 0"):
        build_sim_agent({"agent": name, "seed": -1})


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        ({"agent": "judge", "position_bias": math.inf}, "position_bias"),
        ({"agent": "ranker", "taste": math.nan}, "taste"),
        ({"agent": "persistent", "rho": 1.5}, "rho"),
        ({"agent": "persistent", "drift_horizon": 1}, "drift_horizon"),
        ({"agent": "freelist", "echo": "high"}, "echo"),
        ({"agent": "extractor", "invalid_rate": -0.1}, "invalid_rate"),
    ],
)
def test_numbers_are_finite_and_in_range(cfg: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"sim agent '{cfg['agent']}': field '{field}'"):
        build_sim_agent(cfg)


def test_hashed_generators_are_seeded_by_the_joined_parts() -> None:
    a, b = hashed_rng(3, "taste", "x").random(4), hashed_rng("3:taste", "x").random(4)
    assert a.tolist() == b.tolist()  # one string "3:taste:x" seeds both
    assert a.tolist() != hashed_rng(3, "taste", "y").random(4).tolist()
