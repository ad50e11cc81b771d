"""What every ``sim`` agent shares: it reads request ``meta``, names itself and its version in
:attr:`~SimAgent.identity` beside its own fields (its :class:`~lmaudit.backends.sim.fields.AgentFields`
record, which also gives its constructor keywords and their checks, with errors that name the
agent), and answers the sampling contract one request at a time (``n`` checked here).

:class:`SimAgent` is the ``sim`` backend: a ``model=`` config with ``backend: sim`` builds the
agent its ``agent`` field names (:meth:`SimAgent.from_config`) among the agent classes, each of
which names itself (``name``) and is known by that name once its module is imported (the
package imports them all)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar, cast, get_args, get_origin

from lmaudit.backends.api import BackendAPI
from lmaudit.backends.base import SampleRequest, SampleResult
from lmaudit.backends.registry import register_backend
from lmaudit.backends.sim.config import SimModelConfig
from lmaudit.backends.sim.fields import AgentFields
from lmaudit.errors import BackendError

__all__ = ["SimAgent", "accepted_fields"]

F = TypeVar("F", bound=AgentFields)


def accepted_fields(cls: type[SimAgent]) -> list[str]:
    """Keyword fields an agent class accepts (its record's fields, in identity order)."""
    return cls.Fields.names()


def _plain(value: Any) -> Any:
    """Plain dicts/lists from any Mapping/Sequence (e.g. OmegaConf containers)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


@register_backend("sim", schema=SimModelConfig)
class SimAgent(BackendAPI, Generic[F]):
    """Base of the sim agents. Subclasses set ``name`` and ``version``, name the record of their
    parameters as the type argument (``class X(SimAgent[XFields])``: ``Fields``, and the type of
    ``fields``) and implement :meth:`draws`; the constructor takes the record's fields as
    keywords and checks them."""

    reads_meta: bool = True
    name: ClassVar[str] = "base"
    version: ClassVar[str] = ""
    #: every agent class that names itself, by name (filled as the classes are defined)
    agents: ClassVar[dict[str, type[SimAgent]]] = {}
    #: the record class of the agent's parameters (the type argument; a TypeVar's bound)
    Fields: ClassVar[type[AgentFields]] = AgentFields
    fields: F

    def __init__(self, **given: Any) -> None:
        self.fields = cast(F, self.Fields.checked(self, given))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in vars(cls).get("__orig_bases__", ()):
            origin, args = get_origin(base), get_args(base)
            if isinstance(origin, type) and issubclass(origin, SimAgent) and args:
                record = args[0].__bound__ if isinstance(args[0], TypeVar) else args[0]
                cls.Fields = cast(type[AgentFields], record)
        if "name" in vars(cls):
            known = SimAgent.agents.setdefault(cls.name, cls)
            if known is not cls:
                raise ValueError(f"sim agent {cls.name!r} is defined twice: {known!r} and {cls!r}")

    @classmethod
    def from_fields(cls, cfg: Mapping[str, Any]) -> SimAgent:
        """The agent described by ``cfg``: its ``agent`` name and that agent's fields.

        Raises ValueError naming the field on a missing or unknown agent name, an unknown field
        or a bad value. A ``backend`` key, if present, must be ``"sim"`` and is ignored.
        """
        if not isinstance(cfg, Mapping):
            raise ValueError(f"sim agent config must be a mapping, got {type(cfg).__name__}")
        fields = _plain(cfg)
        if fields.pop("backend", "sim") != "sim":
            raise ValueError(f"sim agent config: field 'backend' must be 'sim', got {cfg['backend']!r}")
        known = sorted(SimAgent.agents)
        if "agent" not in fields:
            raise ValueError(f"sim agent config: missing field 'agent' (one of {known})")
        name = fields.pop("agent")
        agent = SimAgent.agents.get(name) if isinstance(name, str) else None
        if agent is None:
            raise ValueError(f"sim agent config: field 'agent' = {name!r} is unknown (one of {known})")
        return agent(**agent.normalise_fields(fields))

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SimAgent:
        """The agent a ``model=`` config names (``backend: sim``): its ``agent`` and ``seed``,
        with ``params`` as the agent's fields; the model group's other keys are not the agent's."""
        named = {k: config[k] for k in ("agent", "seed") if k in config}
        return cls.from_fields({**named, **(config.get("params") or {})})

    @classmethod
    def normalise_fields(cls, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Config fields -> constructor keywords (hook for accepted alternative spellings)."""
        return dict(fields)

    def params(self) -> dict[str, Any]:
        """The agent's own fields (JSON-able), as they enter :attr:`identity`."""
        return self.fields.identity()

    @property
    def identity(self) -> dict[str, Any]:
        return {"backend": "sim", "agent": self.name, "version": self.version, **self.params()}

    # ---- SamplingBackend
    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        out = []
        for r in requests:
            if isinstance(r.n, bool) or not isinstance(r.n, int) or r.n < 0:
                raise BackendError(f"sim agent {self.name!r}: n must be an integer >= 0, got {r.n!r}")
            out.append(SampleResult(texts=self.draws(r)))
        return out

    def draws(self, request: SampleRequest) -> list[str]:
        """The request's ``n`` completions, draw ``i`` from ``derive_seed(request.seed, i)``."""
        raise NotImplementedError
