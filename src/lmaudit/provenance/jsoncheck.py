"""Checking decoded JSON for people: keys given twice, JSON type names for messages, and
"did you mean" suggestions for mistyped ids and field names."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any


class JsonObject(dict[str, Any]):
    """A decoded JSON object that remembers keys given more than once (the last value wins)."""

    duplicate_keys: tuple[str, ...] = ()

    @classmethod
    def from_pairs(cls, pairs: list[tuple[str, Any]]) -> JsonObject:
        obj = cls(pairs)
        if len(obj) < len(pairs):
            keys = [k for k, _ in pairs]
            obj.duplicate_keys = tuple(k for k in obj if keys.count(k) > 1)
        return obj


def duplicate_keys(obj: dict[str, Any]) -> tuple[str, ...]:
    return obj.duplicate_keys if isinstance(obj, JsonObject) else ()


_JSON_TYPES = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string"}


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for messages."""
    if isinstance(value, list | dict):
        return "list" if isinstance(value, list) else "object"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _loose(name: str) -> str:
    """An id with case, separators and zero padding ignored: how hand-typed ids usually go wrong."""
    folded = re.sub(r"[-_. ]", "-", name.casefold())
    return re.sub(r"\d+", lambda m: str(int(m.group())), folded)


def suggest(name: str, candidates: Sequence[str], n: int = 1) -> str:
    """`` (did you mean 'x'?)`` for the closest candidates, or ``""`` when none is close."""
    pool = list(dict.fromkeys(candidates))
    same = [c for c in pool if _loose(c) == _loose(name)]  # e.g. 'S1-1' -> 's1-01'
    close = (same + [c for c in difflib.get_close_matches(name, pool, n=n, cutoff=0.6) if c not in same])[:n]
    if not close:
        return ""
    quoted = [repr(c) for c in close]
    either = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f" (did you mean {either}?)"
