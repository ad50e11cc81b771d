"""The ``sim`` backend: ground-truth agents with known answers that read request ``meta``.

Build one from a plain config dict with :func:`build_sim_agent`::

    build_sim_agent({"agent": "projective", "seed": 0, "other_mass": 0.0})

Each agent declares its fields once, as a record (:class:`~lmaudit.backends.sim.fields.AgentFields`:
type, default, bounds), from which its constructor keywords, their checks and its identity
derive. Fields every QQ agent has: :class:`~lmaudit.backends.sim.qq.core.QQFields`;
agent-specific fields: see :mod:`lmaudit.backends.sim.qq.agents` and each sampler's module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmaudit.backends.sim.base import SimAgent, accepted_fields
from lmaudit.backends.sim.extractor import SimExtractor
from lmaudit.backends.sim.freelist import FreeListSampler
from lmaudit.backends.sim.judge import SimJudge
from lmaudit.backends.sim.persistent import PersistentSampler
from lmaudit.backends.sim.qq.agents import (
    QQ_AGENTS,
    LudersAsymmetricAgent,
    LudersSymmetricAgent,
    MixtureRepetitionAgent,
    ProjectiveAgent,
    RepetitionAgent,
)
from lmaudit.backends.sim.qq.core import SimQQAgent
from lmaudit.backends.sim.qq.readout import OTHER_TOKEN, SIM_QQ_VERSION, SequentialKernel
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


def build_sim_agent(cfg: Mapping[str, Any]) -> Any:
    """The sim agent (a :class:`SimQQAgent`, or a sampler of ``SIM_SAMPLERS``) described by
    ``cfg`` (:meth:`SimAgent.from_fields`)."""
    return SimAgent.from_fields(cfg)


def build_sim_backend(model_cfg: Mapping[str, Any]) -> SimAgent:
    """The agent a ``model=`` config names (:meth:`SimAgent.from_config`)."""
    return SimAgent.from_config(model_cfg)
