"""The ``persistent`` sim sampler: answer sequences with a known persistence and drift.

Each request's ``n`` draws form one sequence. Draw 0 comes from the base shares; draw
``i >= 1`` repeats draw ``i - 1`` with probability ``rho``, else is a fresh draw from the shares
at position ``i``. Shares may drift linearly from ``shares`` (draw 0) to ``drift_to`` (draw
``drift_horizon - 1`` and after). Draw ``i`` uses only a generator seeded by
``derive_seed(request.seed, i)`` (two uniforms: copy or not, and the fresh answer), so a
sequence is a deterministic function of the request seed and its first ``m`` draws do not
depend on ``n``: the per-draw cache entries stay valid.

Fields (all enter :attr:`identity`): :class:`PersistentFields`.

Temperature, top-p and max tokens are ignored. The sampler has no label-log-probability contract.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np

from lmaudit.backends.base import SampleRequest, derive_seed
from lmaudit.backends.sim.base import SimAgent
from lmaudit.backends.sim.fields import AgentFields, Bounds, Check, Unit, hashed_rng

__all__ = ["SIM_PERSISTENT_VERSION", "PersistentSampler"]

SIM_PERSISTENT_VERSION = "draws-sim/1"


def _answers(agent: SimAgent, name: str, value: Any, earlier: Any) -> list[str]:
    if (
        isinstance(value, str | bytes)
        or not isinstance(value, Sequence)
        or not value
        or not all(isinstance(a, str) and a for a in value)
        or len(set(value)) != len(value)
    ):
        raise ValueError(
            f"sim agent {agent.name!r}: field {name!r} must be a list of distinct non-empty strings, got {value!r}"
        )
    return [str(a) for a in value]


def _shares(agent: SimAgent, name: str, value: Any, earlier: Mapping[str, Any]) -> list[float] | None:
    """``value`` (None, or one share per answer) normalised to sum to 1."""
    if value is None:
        return None
    k = len(earlier["answers"])
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != k:
        raise ValueError(
            f"sim agent {agent.name!r}: field {name!r} must be a list of {k} shares, got {value!r}"
        )
    out = []
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
            raise ValueError(
                f"sim agent {agent.name!r}: field '{name}[{i}]' must be a number >= 0, got {x!r}"
            )
        out.append(float(x))
    total = sum(out)
    if total <= 0:
        raise ValueError(f"sim agent {agent.name!r}: field {name!r} must not sum to 0")
    return [x / total for x in out]


@dataclass(frozen=True, kw_only=True)
class PersistentFields(AgentFields):
    """The ``persistent`` agent's parameters."""

    rho: Unit = 0.3  # persistence: probability that a draw repeats the previous one
    answers: Annotated[list[str], Check(_answers)] = field(  # the answer texts
        default_factory=lambda: ["red", "green", "blue", "yellow"]
    )
    # base shares, one per answer (None: drawn per probe, Dirichlet(1), from seed and meta["probe"])
    shares: Annotated[list[float] | None, Check(_shares)] = None
    drift_to: Annotated[list[float] | None, Check(_shares)] = None  # end shares of a linear drift
    drift_horizon: Annotated[int, Bounds(2)] = 20  # draws over which the drift completes
    seed: int = 0  # per-probe share draws


class PersistentSampler(SimAgent[PersistentFields]):
    """Sampling contract only (:class:`~lmaudit.backends.base.SamplingBackend`)."""

    name = "persistent"
    version = SIM_PERSISTENT_VERSION

    def base_shares(self, probe: str) -> list[float]:
        """The shares of draw 0 for ``probe``: ``shares``, or a Dirichlet(1) draw from (seed, probe)."""
        if self.fields.shares is not None:
            return list(self.fields.shares)
        rng = hashed_rng(self.fields.seed, probe)
        return [float(x) for x in rng.dirichlet(np.ones(len(self.fields.answers)))]

    def shares_at(self, probe: str, draw: int) -> np.ndarray:
        start = np.asarray(self.base_shares(probe))
        if self.fields.drift_to is None:
            return start
        tau = min(1.0, draw / (self.fields.drift_horizon - 1))
        return (1.0 - tau) * start + tau * np.asarray(self.fields.drift_to)

    def draws(self, request: SampleRequest) -> list[str]:
        probe = str(request.meta.get("probe", ""))
        last = len(self.fields.answers) - 1
        texts: list[str] = []
        prev = -1
        for i in range(request.n):
            u_copy, u_fresh = np.random.default_rng(derive_seed(request.seed, i)).random(2)
            if i > 0 and u_copy < self.fields.rho:
                k = prev
            else:
                cum = np.cumsum(self.shares_at(probe, i))
                k = min(int(np.searchsorted(cum, u_fresh * cum[-1], side="right")), last)
            texts.append(self.fields.answers[k])
            prev = k
        return texts
