"""Sim agents' config fields: each agent declares its parameters once, as a frozen dataclass
of typed fields (:class:`AgentFields`), from which its constructor keywords, their checks (with
errors naming the agent and the field) and its identity fields all derive; and the hash-seeded
generators their fixed draws come from.

A field's type says how it is checked: ``float`` a finite number (``Annotated[float,
Bounds(lo, hi)]`` in an interval; :data:`Unit`, :data:`NonNegative`), ``int`` an integer >= 0
(``Annotated[int, Bounds(lo, hi)]``: in ``[lo, hi]``), ``X | None`` also None, a ``Literal`` one of its
values, and ``Annotated[..., Check(fn)]`` the field's own check."""

from __future__ import annotations

import copy
import hashlib
import math
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, fields, is_dataclass
from typing import Annotated, Any, Literal, Protocol, Self, Union, get_args, get_origin, get_type_hints

import numpy as np

__all__ = [
    "OMITTED_IF_NONE",
    "AgentFields",
    "Bounds",
    "Check",
    "Named",
    "NonNegative",
    "Unit",
    "count",
    "hashed_rng",
    "mapping",
    "number",
]


def number(
    agent: str, name: str, value: Any, lo: float = -math.inf, hi: float = math.inf, *, hi_open: bool = False
) -> float:
    """``value`` as a finite float in ``[lo, hi]`` (``[lo, hi)`` if ``hi_open``; a bool is not a number)."""
    interval = f"[{lo}, {hi})" if hi_open else f"[{lo}, {hi}]"
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ValueError(f"sim agent {agent!r}: field {name!r} must be a number in {interval}, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < lo or x > hi or (hi_open and x >= hi):
        raise ValueError(f"sim agent {agent!r}: field {name!r} must be in {interval}, got {value!r}")
    return x


def count(agent: str, name: str, value: Any, minimum: int = 0) -> int:
    """``value`` as an integer >= ``minimum`` (seeds, signatures, horizons)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < minimum:
        raise ValueError(
            f"sim agent {agent!r}: field {name!r} must be an integer >= {minimum}, got {value!r}"
        )
    return int(value)


@dataclass(frozen=True)
class Bounds:
    """A number field's interval ``[lo, hi]`` (``[lo, hi)`` if ``hi_open``); an integer
    field's ``[lo, hi]``."""

    lo: float = -math.inf
    hi: float = math.inf
    hi_open: bool = False


@dataclass(frozen=True)
class Check:
    """A field checked by its own ``fn(agent, name, value, earlier)`` (``earlier``: the fields
    checked before it), which returns the value the agent keeps."""

    fn: Callable[[Any, str, Any, Mapping[str, Any]], Any]  # the agent: a SimAgent subclass


#: marks an optional field that enters the identity only when it is not None
OMITTED_IF_NONE = "omitted if None"

Unit = Annotated[float, Bounds(0.0, 1.0)]
NonNegative = Annotated[float, Bounds(0.0)]


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """``cls``'s resolved field types, with their ``Annotated`` marks (computed once per class)."""
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls, include_extras=True)
    return _HINTS[cls]


def _default(f: Field[Any]) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


def mapping(agent: str, name: str, value: Any) -> Mapping[Any, Any]:
    """``value`` as a mapping (None: empty), else an error naming the agent and the field."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"sim agent {agent!r}: field {name!r} must be a mapping, got {value!r}")
    return value


def _parts(hint: Any) -> tuple[Any, list[Any]]:
    """A type and its ``Annotated`` marks (none: an empty list)."""
    if get_origin(hint) is Annotated:
        kind, *marks = get_args(hint)
        return kind, marks
    return hint, []


class Named(Protocol):
    """What the checks read of the agent they check: its name (a :class:`Check` may read more)."""

    @property
    def name(self) -> str: ...


def _check(agent: Named, name: str, hint: Any, value: Any, earlier: Mapping[str, Any]) -> Any:
    """``value`` checked as the type ``hint`` says (module docstring)."""
    kind, marks = _parts(hint)
    for mark in marks:
        if isinstance(mark, Check):
            return mark.fn(agent, name, value, earlier)
    if get_origin(kind) in (Union, types.UnionType) and type(None) in get_args(kind):
        if value is None:
            return None
        (inner,) = (k for k in get_args(kind) if k is not type(None))
        kind, inner_marks = _parts(inner)  # e.g. ``Unit | None``
        return _check(
            agent,
            name,
            Annotated[(kind, *marks, *inner_marks)] if marks or inner_marks else kind,
            value,
            earlier,
        )
    bounds = next((m for m in marks if isinstance(m, Bounds)), Bounds())
    if get_origin(kind) is Literal:
        if value not in get_args(kind):
            allowed = list(get_args(kind))
            raise ValueError(f"sim agent {agent.name!r}: field {name!r} = {value!r} is not one of {allowed}")
        return value
    if kind is int:
        n = count(agent.name, name, value, 0 if bounds.lo == -math.inf else int(bounds.lo))
        if n > bounds.hi:
            raise ValueError(
                f"sim agent {agent.name!r}: field {name!r} must be at most {bounds.hi:g}, got {value!r}"
            )
        return n
    if kind is float:
        return number(agent.name, name, value, bounds.lo, bounds.hi, hi_open=bounds.hi_open)
    raise TypeError(f"sim agent {agent.name!r}: field {name!r} of type {hint!r} needs a Check(...) mark")


@dataclass(frozen=True, kw_only=True)
class AgentFields:
    """The checked parameters of a sim agent. Subclasses declare fields (type, default, bounds);
    a subclass's record extends its base's and lists its own fields first in the identity."""

    @classmethod
    def names(cls) -> list[str]:
        """The field names in identity order: a record's own fields before those it extends."""
        out: list[str] = []
        for klass in cls.__mro__:
            if is_dataclass(klass):
                base = klass.__mro__[1]
                inherited = {f.name for f in fields(base)} if is_dataclass(base) else set()
                out += [f.name for f in fields(klass) if f.name not in inherited]
        return out

    @classmethod
    def checked(cls, agent: Named, given: Mapping[str, Any]) -> Self:
        """The record of ``given`` (the rest defaults), each field checked in identity order.

        Raises ValueError naming the agent and the field (or the unknown fields)."""
        names = cls.names()
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(
                f"sim agent {agent.name!r}: unknown field(s) {unknown} (allowed: {sorted(names)})"
            )
        hints = _hints(cls)
        declared = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for name in names:
            value = given[name] if name in given else _default(declared[name])
            values[name] = _check(agent, name, hints[name], value, values)
        return cls(**values)

    def identity(self) -> dict[str, Any]:
        """The fields as they enter the agent's identity, in identity order."""
        hints = _hints(type(self))
        out = {}
        for name in self.names():
            value = getattr(self, name)
            if value is None and OMITTED_IF_NONE in getattr(hints[name], "__metadata__", ()):
                continue
            out[name] = copy.deepcopy(value)  # the agent's own settings stay its own
        return out


def hashed_rng(*parts: Any) -> np.random.Generator:
    """A generator seeded by the SHA-256 of ``"p1:p2:..."``: the same draws in every process."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))
