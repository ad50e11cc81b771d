"""The ``sim`` backend: ground-truth agents with known answers that read request ``meta``.

Build one from a plain config dict with :func:`build_sim_agent`::

    build_sim_agent({"agent": "projective", "seed": 0, "other_mass": 0.0})

Common fields (every agent): ``seed`` (int >= 0, default 0), ``other_mass`` (in [0, 1),
default 0.0: that fraction of mass goes to the token ``"<other>"``), ``label_bias`` (default
0.0: logit shift toward label ``"A"`` when the labels are A/B), ``marginal_range`` (default
[0.1, 0.9]: per-item draws keep both first-position marginals inside it) and ``items``
(default {}: per-item parameter overrides). Agent-specific fields: see
:mod:`lmaudit.backends.sim.qq_agents`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from lmaudit.backends.sim.base import SimAgent
from lmaudit.backends.sim.extractor import SimExtractor
from lmaudit.backends.sim.freelist import FreeListSampler
from lmaudit.backends.sim.judge import SimJudge
from lmaudit.backends.sim.persistent import PersistentSampler
from lmaudit.backends.sim.qq_agents import (
    QQ_AGENTS,
    LudersAsymmetricAgent,
    LudersSymmetricAgent,
    MixtureRepetitionAgent,
    ProjectiveAgent,
    RepetitionAgent,
)
from lmaudit.backends.sim.qq_core import SimQQAgent
from lmaudit.backends.sim.qq_readout import OTHER_TOKEN, SIM_QQ_VERSION, SequentialKernel
from lmaudit.backends.sim.ranker import RankingSampler

SIM_AGENTS: dict[str, type[SimQQAgent]] = dict(QQ_AGENTS)
SIM_SAMPLERS: dict[str, type[SimAgent]] = {
    "persistent": PersistentSampler,  # sampling only
    "freelist": FreeListSampler,
    "extractor": SimExtractor,
    "ranker": RankingSampler,
}
SIM_JUDGES: dict[str, type[SimJudge]] = {"judge": SimJudge}  # pairwise judge (both contracts)

__all__ = [
    "OTHER_TOKEN",
    "SIM_AGENTS",
    "SIM_QQ_VERSION",
    "SIM_SAMPLERS",
    "FreeListSampler",
    "LudersAsymmetricAgent",
    "LudersSymmetricAgent",
    "MixtureRepetitionAgent",
    "PersistentSampler",
    "ProjectiveAgent",
    "RankingSampler",
    "RepetitionAgent",
    "SequentialKernel",
    "SimAgent",
    "SimExtractor",
    "SimQQAgent",
    "accepted_fields",
    "build_sim_agent",
    "build_sim_backend",
]


def accepted_fields(cls: type) -> list[str]:
    """Keyword fields an agent class accepts (its own and its bases')."""
    names: list[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in names:
                names.append(p.name)
    return names


def _plain(value: Any) -> Any:
    """Plain dicts/lists from any Mapping/Sequence (e.g. OmegaConf containers)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


def build_sim_agent(cfg: Mapping[str, Any]) -> Any:
    """The sim agent (a :class:`SimQQAgent`, or a sampler of ``SIM_SAMPLERS``) described by ``cfg``.

    Raises ValueError naming the field on a missing or unknown agent name, an unknown field
    or a bad value. A ``backend`` key, if present, must be ``"sim"`` and is ignored.
    """
    if not isinstance(cfg, Mapping):
        raise ValueError(f"sim agent config must be a mapping, got {type(cfg).__name__}")
    fields = _plain(cfg)
    if fields.pop("backend", "sim") != "sim":
        raise ValueError(f"sim agent config: field 'backend' must be 'sim', got {cfg['backend']!r}")
    known = sorted({*SIM_AGENTS, *SIM_SAMPLERS, *SIM_JUDGES})
    if "agent" not in fields:
        raise ValueError(f"sim agent config: missing field 'agent' (one of {known})")
    name = fields.pop("agent")
    cls: type[SimAgent] | None = None
    if isinstance(name, str):
        cls = SIM_AGENTS.get(name) or SIM_SAMPLERS.get(name) or SIM_JUDGES.get(name)
    if cls is None:
        raise ValueError(f"sim agent config: field 'agent' = {name!r} is unknown (one of {known})")
    fields = cls.normalise_fields(fields)
    allowed = accepted_fields(cls)
    unknown = sorted(set(fields) - set(allowed))
    if unknown:
        raise ValueError(f"sim agent {name!r}: unknown field(s) {unknown} (allowed: {sorted(allowed)})")
    return cls(**fields)


def build_sim_backend(model_cfg: Mapping[str, Any]) -> SimAgent:
    """The agent a ``model=`` config names (``backend: sim``): its ``agent`` and ``seed``, with
    ``params`` as the agent's fields; the model group's other keys are not the agent's."""
    named = {k: model_cfg[k] for k in ("agent", "seed") if k in model_cfg}
    return build_sim_agent({**named, **(model_cfg.get("params") or {})})
