"""Ranges of config fields, declared beside the schema: what every schema module imports.

A schema field with a valid range is declared with :func:`ranged` instead of
``dataclasses.field``; its rule lives in the field's metadata::

    epsilon: float = ranged(0.02, ge=0)
    labels: list[str] = ranged(factory=lambda: ["A", "B"], length=2, distinct=True, each={"nonempty": True})
    kind: str = ranged(MISSING, choices=("logprob", "sampled"))

:func:`validate_node` lists the fields of one config node (and its nested dataclasses and lists
of them) that lie outside their ranges; :func:`lmaudit.config.checks.validate` checks a whole
composed config with it.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from lmaudit.config.suggest import did_you_mean

__all__ = ["Rule", "ranged", "validate_node"]


@dataclass(frozen=True)
class Rule:
    """A field's valid range. Numbers: ``ge``/``gt``/``le``/``lt``; any value: ``choices``;
    strings: ``nonempty``; lists: ``length``, ``min_len``, ``distinct``, ``subset`` (every item
    one of), and ``each`` (a rule every item must satisfy). ``None`` always passes (an optional
    field left unset)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[Any, ...] | None = None
    nonempty: bool = False
    length: int | None = None
    min_len: int | None = None
    distinct: bool = False
    subset: tuple[Any, ...] | None = None
    each: Rule | None = None

    def describe(self) -> str:
        parts = []
        lo = f"> {self.gt:g}" if self.gt is not None else f">= {self.ge:g}" if self.ge is not None else ""
        hi = f"< {self.lt:g}" if self.lt is not None else f"<= {self.le:g}" if self.le is not None else ""
        if lo or hi:
            parts.append(" and ".join(p for p in (lo, hi) if p))
        if self.choices is not None:
            parts.append("one of " + ", ".join(map(str, self.choices)))
        if self.nonempty:
            parts.append("a non-empty string")
        if self.length is not None:
            parts.append(f"exactly {self.length} items")
        if self.min_len is not None:
            parts.append(f"at least {self.min_len} item{'s' if self.min_len != 1 else ''}")
        if self.distinct:
            parts.append("distinct items")
        if self.subset is not None:
            parts.append("items from " + ", ".join(map(str, self.subset)))
        if self.each is not None:
            parts.append(f"each item {self.each.describe()}")
        return "; ".join(parts)

    def accepts(self, value: Any) -> bool:
        if value is None:
            return True
        if any(b is not None for b in (self.ge, self.gt, self.le, self.lt)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                return False
            if (self.ge is not None and value < self.ge) or (self.gt is not None and value <= self.gt):
                return False
            if (self.le is not None and value > self.le) or (self.lt is not None and value >= self.lt):
                return False
        if self.choices is not None and value not in self.choices:
            return False
        if self.nonempty and not (isinstance(value, str) and value.strip()):
            return False
        if self.length is not None or self.min_len is not None or self.distinct or self.subset or self.each:
            if not isinstance(value, (list, tuple)):
                return False
            if self.length is not None and len(value) != self.length:
                return False
            if self.min_len is not None and len(value) < self.min_len:
                return False
            if self.distinct and len(set(map(str, value))) != len(value):
                return False
            if self.subset is not None and any(v not in self.subset for v in value):
                return False
            if self.each is not None and not all(self.each.accepts(v) for v in value):
                return False
        return True


def _rule(spec: Rule | Mapping[str, Any] | None) -> Rule | None:
    if spec is None or isinstance(spec, Rule):
        return spec
    spec = dict(spec)
    for key in ("choices", "subset"):
        if spec.get(key) is not None:
            spec[key] = tuple(spec[key])
    if spec.get("each") is not None:
        spec["each"] = _rule(spec["each"])
    return Rule(**spec)


def ranged(default: Any = MISSING, *, factory: Callable[[], Any] | None = None, **rule: Any) -> Any:
    """A dataclass field with a valid range (see :class:`Rule` for the keywords)."""
    meta = {"range": _rule(rule)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _dataclasses_in(tp: Any) -> tuple[type | None, bool]:
    """(the dataclass a field holds, whether it is a list of them)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            found = _dataclasses_in(arg)
            if found[0] is not None:
                return found
        return None, False
    if origin in (list, Sequence):
        args = typing.get_args(tp)
        inner = args[0] if args else None
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            return inner, True
        return None, False
    return (tp, False) if isinstance(tp, type) and dataclasses.is_dataclass(tp) else (None, False)


def _plain(node: Any) -> Any:
    if isinstance(node, (DictConfig, ListConfig)):
        return OmegaConf.to_container(node, resolve=True)
    return node


def validate_node(node: Any, schema: type, where: str) -> list[str]:
    """The out-of-range fields of ``node`` (a config node of dataclass ``schema``), as
    ``"<where>.<field> = <value>: must be <range>"``."""
    if not isinstance(node, DictConfig) or node._is_missing() or node._is_none():
        return []
    problems: list[str] = []
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        if f.name not in node or OmegaConf.is_missing(node, f.name):
            continue
        path = f"{where}.{f.name}" if where else f.name
        value = node[f.name]
        rule = f.metadata.get("range")
        if rule is not None:
            plain = _plain(value)
            if not rule.accepts(plain):
                near = ""
                if rule.choices is not None and isinstance(plain, str):
                    near = did_you_mean(plain, [str(c) for c in rule.choices])
                problems.append(f"{path} = {plain!r} is out of range (allowed: {rule.describe()}){near}")
        inner, is_list = _dataclasses_in(hints.get(f.name))
        if inner is None:
            continue
        if is_list and isinstance(value, ListConfig):
            for i, item in enumerate(value):
                problems += validate_node(item, inner, f"{path}[{i}]")
        elif not is_list:
            problems += validate_node(value, inner, path)
    check = getattr(schema, "check_relations", None)
    if check is not None:
        problems += [f"{where}: {p}" if where else p for p in check(node)]
    return problems
