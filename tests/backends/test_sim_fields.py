"""Sim agents declare their parameters once, as a record of typed fields
(:class:`lmaudit.backends.sim.fields.AgentFields`): the constructor keywords, their checks, the
accepted config fields and the identity all derive from it, and the identities are those the
agents wrote when each parameter was spelled out three times (every cache key stays valid)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Annotated, Any, Literal

import numpy as np
import pytest

from lmaudit.backends.sim import SIM_AGENTS, SIM_SAMPLERS, SimAgent, accepted_fields, build_sim_agent
from lmaudit.backends.sim.fields import OMITTED_IF_NONE, AgentFields, Bounds, NonNegative, Unit
from lmaudit.backends.sim.freelist import FreeListSampler
from lmaudit.backends.sim.qq.agents import LudersSymmetricAgent, QubitFields
from lmaudit.backends.sim.qq.core import QQFields

NAMES = sorted({*SIM_AGENTS, *SIM_SAMPLERS, "judge"})
QQ_COMMON = '"other_mass": 0.0, "label_bias": 0.0, "marginal_range": [0.1, 0.9], "items": {}, "seed": 0}'
# json.dumps (insertion order, 1.0 vs 1) of each agent's identity with its defaults, as the agents
# wrote it before their fields were declared as records
DEFAULTS = {
    "extractor": '{"backend": "sim", "agent": "extractor", "version": "extractor-sim/1", "seed": 0, '
    '"invalid_rate": 0.0}',
    "freelist": '{"backend": "sim", "agent": "freelist", "version": "freelist-sim/1", "seed": 0, "signature": 0, '
    '"signature_strength": 1.5, "persona_strength": 1.5, "persona_share": 0.2, "echo": 0.0, "leak": 0.0, '
    '"zipf": 1.0, "widths": {}}',
    "judge": '{"backend": "sim", "agent": "judge", "version": "judge-sim/1", "seed": 0, "position_bias": 0.0, '
    '"wrapper_attraction": 0.0, "wrapper_aversion": 0.0, "noise": 1.0, "content_sd": 2.0, "tie_margin": 0.5, '
    '"invalid_rate": 0.0, "carryover": 0.0, "items": {}}',
    "luders_asymmetric": '{"backend": "sim", "agent": "luders_asymmetric", "version": "qq-sim/1", "eta_a_y": 0.9, '
    '"eta_a_n": 0.5, "eta_b_y": 0.9, "eta_b_n": 0.5, "purity": 1.0, ' + QQ_COMMON,
    "luders_symmetric": '{"backend": "sim", "agent": "luders_symmetric", "version": "qq-sim/1", "eta": 0.7, '
    '"purity": 1.0, ' + QQ_COMMON,
    "mixture_repetition": '{"backend": "sim", "agent": "mixture_repetition", "version": "qq-sim/1", '
    '"r_ab_y": 0.6, "r_ab_n": 0.2, "r_ba_y": 0.6, "r_ba_n": 0.2, ' + QQ_COMMON,
    "persistent": '{"backend": "sim", "agent": "persistent", "version": "draws-sim/1", "rho": 0.3, '
    '"answers": ["red", "green", "blue", "yellow"], "shares": null, "drift_to": null, "drift_horizon": 20, '
    '"seed": 0}',
    "projective": '{"backend": "sim", "agent": "projective", "version": "qq-sim/1", "purity": 1.0, '
    + QQ_COMMON,
    "ranker": '{"backend": "sim", "agent": "ranker", "version": "ranker-sim/1", "seed": 0, '
    '"conditioned_preference": 1.0, "persona_preference": 0.0, "rare_preference": 0.0, "taste": 0.5, '
    '"noise": 1.0, "style": "chain", "invalid": 0.0}',
    "repetition": '{"backend": "sim", "agent": "repetition", "version": "qq-sim/1", "r": 0.5, ' + QQ_COMMON,
}
# configs like the registered runs' (ints given where floats are kept, overrides, omitted fields)
CONFIGS: list[tuple[dict[str, Any], str]] = [
    (
        {"agent": "judge", "wrapper_attraction": 10.0, "noise": 0.5, "items": {"p2": {"quality": 1}}},
        '{"backend": "sim", "agent": "judge", "version": "judge-sim/1", "seed": 0, "position_bias": 0.0, '
        '"wrapper_attraction": 10.0, "wrapper_aversion": 0.0, "noise": 0.5, "content_sd": 2.0, "tie_margin": 0.5, '
        '"invalid_rate": 0.0, "carryover": 0.0, "items": {"p2": {"quality": 1.0}}}',
    ),
    (
        {"agent": "mixture_repetition", "r_AB": {"y": 0.8, "n": 0.2}, "r_ba_y": 0.8, "r_ba_n": 0.2},
        '{"backend": "sim", "agent": "mixture_repetition", "version": "qq-sim/1", "r_ab_y": 0.8, "r_ab_n": 0.2, '
        '"r_ba_y": 0.8, "r_ba_n": 0.2, ' + QQ_COMMON,
    ),
    (
        {"agent": "repetition", "r": 1, "items": {"s1": {"v": 0.5, "u": 1}}, "marginal_range": [0, 1]},
        '{"backend": "sim", "agent": "repetition", "version": "qq-sim/1", "r": 1.0, "other_mass": 0.0, '
        '"label_bias": 0.0, "marginal_range": [0.0, 1.0], "items": {"s1": {"u": 1.0, "v": 0.5}}, "seed": 0}',
    ),
    (
        {
            "agent": "luders_symmetric",
            "eta": 1,
            "purity": 0.5,
            "other_mass": 0.25,
            "label_bias": -2,
            "seed": 7,
        },
        '{"backend": "sim", "agent": "luders_symmetric", "version": "qq-sim/1", "eta": 1.0, "purity": 0.5, '
        '"other_mass": 0.25, "label_bias": -2.0, "marginal_range": [0.1, 0.9], "items": {}, "seed": 7}',
    ),
    (
        {
            "agent": "freelist",
            "signature": 4,
            "signature_strength": 2,
            "persona_strength": 3.0,
            "echo": 0.3,
            "widths": {"q2": 5, "q1": 3},
        },
        '{"backend": "sim", "agent": "freelist", "version": "freelist-sim/1", "seed": 0, "signature": 4, '
        '"signature_strength": 2.0, "persona_strength": 3.0, "persona_share": 0.2, "echo": 0.3, "leak": 0.0, '
        '"zipf": 1.0, "widths": {"q1": 3, "q2": 5}}',
    ),
    (
        {
            "agent": "ranker",
            "conditioned_preference": 0.5,
            "persona_preference": 1,
            "style": "numbered",
            "finalist_persona_preference": 2,
        },
        '{"backend": "sim", "agent": "ranker", "version": "ranker-sim/1", "seed": 0, "conditioned_preference": 0.5, '
        '"persona_preference": 1.0, "rare_preference": 0.0, "taste": 0.5, "noise": 1.0, "style": "numbered", '
        '"invalid": 0.0, "finalist_persona_preference": 2.0}',
    ),
    (
        {
            "agent": "persistent",
            "rho": 1,
            "answers": ["a", "b"],
            "shares": [1, 3],
            "drift_to": [1, 1],
            "drift_horizon": 7,
        },
        '{"backend": "sim", "agent": "persistent", "version": "draws-sim/1", "rho": 1.0, "answers": ["a", "b"], '
        '"shares": [0.25, 0.75], "drift_to": [0.5, 0.5], "drift_horizon": 7, "seed": 0}',
    ),
]


@pytest.mark.parametrize("name", NAMES)
def test_identity_with_defaults_is_pinned(name: str) -> None:
    assert json.dumps(build_sim_agent({"agent": name}).identity) == DEFAULTS[name]


@pytest.mark.parametrize(("cfg", "want"), CONFIGS)
def test_identity_of_configured_agents_is_pinned(cfg: dict[str, Any], want: str) -> None:
    assert json.dumps(build_sim_agent(cfg).identity) == want


@pytest.mark.parametrize("name", NAMES)
def test_keywords_checks_and_identity_derive_from_one_record(name: str) -> None:
    cls = SimAgent.agents[name]
    agent = build_sim_agent({"agent": name})
    names = cls.Fields.names()
    assert isinstance(agent.fields, cls.Fields)
    assert accepted_fields(cls) == names
    # every field a default record holds enters the identity, in the record's order
    assert list(agent.params()) == [n for n in names if n in agent.params()]
    # each field given explicitly at its default value builds the same agent
    explicit = cls(**{n: getattr(agent.fields, n) for n in names})
    assert explicit.identity == agent.identity


def test_a_subclass_record_extends_its_base_with_its_own_fields_first() -> None:
    assert issubclass(LudersSymmetricAgent.Fields, QubitFields) and issubclass(QubitFields, QQFields)
    assert LudersSymmetricAgent.Fields.names() == ["eta", "purity", *QQFields.names()]
    assert QQFields.names() == ["other_mass", "label_bias", "marginal_range", "items", "seed"]


def test_an_agent_built_directly_refuses_unknown_keywords_by_name() -> None:
    with pytest.raises(
        ValueError, match=r"^sim agent 'freelist': unknown field\(s\) \['bogus'\] \(allowed: \["
    ):
        FreeListSampler(bogus=1)


@dataclass(frozen=True, kw_only=True)
class _Toy(AgentFields):
    at_least_two: Annotated[int, Bounds(2)] = 2
    half_open: Annotated[float, Bounds(0.0, 1.0, hi_open=True)] = 0.0
    unit: Unit = 0.5
    positive: NonNegative = 1.0
    any_number: float = 0.0
    kind: Literal["x", "y"] = "x"
    maybe: Annotated[float | None, OMITTED_IF_NONE] = None
    kept_none: float | None = None
    maybe_unit: Unit | None = None
    one_to_five: Annotated[int, Bounds(1, 5)] = 1


TOY = SimpleNamespace(name="toy")  # all the checks read of an agent: its name


def test_marks_on_the_field_types_drive_the_checks() -> None:
    rec = _Toy.checked(
        TOY, {"at_least_two": np.int64(3), "unit": 1, "positive": np.float32(2.5), "kind": "y"}
    )
    assert rec.identity() == {
        "at_least_two": 3,
        "half_open": 0.0,
        "unit": 1.0,
        "positive": 2.5,
        "any_number": 0.0,
        "kind": "y",
        "kept_none": None,
        "maybe_unit": None,
        "one_to_five": 1,
    }
    assert [type(rec.at_least_two), type(rec.unit), type(rec.positive)] == [int, float, float]
    assert _Toy.checked(TOY, {"maybe": 3}).identity()["maybe"] == 3.0


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"at_least_two": 1}, "field 'at_least_two' must be an integer >= 2, got 1"),
        ({"at_least_two": 2.0}, "field 'at_least_two' must be an integer >= 2, got 2.0"),
        ({"half_open": 1.0}, "field 'half_open' must be in [0.0, 1.0), got 1.0"),
        ({"unit": True}, "field 'unit' must be a number in [0.0, 1.0], got True"),
        ({"positive": -0.5}, "field 'positive' must be in [0.0, inf], got -0.5"),
        ({"any_number": float("nan")}, "field 'any_number' must be in [-inf, inf], got nan"),
        ({"kind": "z"}, "field 'kind' = 'z' is not one of ['x', 'y']"),
        ({"maybe": "a"}, "field 'maybe' must be a number in [-inf, inf], got 'a'"),
        ({"maybe_unit": 1.5}, "field 'maybe_unit' must be in [0.0, 1.0], got 1.5"),
        ({"one_to_five": 6}, "field 'one_to_five' must be at most 5, got 6"),
        (
            {"nope": 1, "also": 2},
            "unknown field(s) ['also', 'nope'] (allowed: ['any_number', 'at_least_two', ",
        ),
    ],
)
def test_bad_values_are_refused_in_one_line_naming_agent_and_field(
    given: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as err:
        _Toy.checked(TOY, given)
    assert str(err.value).startswith(f"sim agent 'toy': {message}") and "\n" not in str(err.value)


def test_a_field_type_without_a_check_is_a_declaration_error() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Unchecked(AgentFields):
        label: str = "a"

    with pytest.raises(
        TypeError, match=r"sim agent 'toy': field 'label' of type .* needs a Check\(\.\.\.\) mark"
    ):
        Unchecked.checked(TOY, {})


def test_an_optional_bounded_field_keeps_its_bounds() -> None:
    assert _Toy.checked(TOY, {"maybe_unit": 0.25}).identity()["maybe_unit"] == 0.25


def test_the_identity_is_a_copy_of_the_agents_settings() -> None:
    """Changing what ``identity`` returned changes neither the agent nor its next identity."""
    agent = FreeListSampler(widths={"q": 5})
    agent.identity["widths"]["q"] = 99
    assert agent.width("q") == 5 and agent.identity["widths"] == {"q": 5}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"agent": "freelist", "widths": [1]},
            "sim agent 'freelist': field 'widths' must be a mapping, got [1]",
        ),
        (
            {"agent": "freelist", "widths": {"a": "x"}},
            "sim agent 'freelist': field 'widths.a' must be an integer >= 2",
        ),
        (
            {"agent": "freelist", "widths": {"a": 2.9}},
            "sim agent 'freelist': field 'widths.a' must be an integer >= 2",
        ),
        (
            {"agent": "freelist", "widths": {"a": 1}},
            "sim agent 'freelist': field 'widths.a' must be an integer >= 2",
        ),
        ({"agent": "judge", "items": "x"}, "sim agent 'judge': field 'items' must be a mapping, got 'x'"),
        (
            {"agent": "judge", "items": {"p": 3}},
            "sim agent 'judge': field 'items.p' must be a mapping, got 3",
        ),
    ],
)
def test_nested_settings_are_refused_in_one_line(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        SimAgent.from_fields(config)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
