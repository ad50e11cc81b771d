"""Checking JSON for people: strict decoding (keys given twice and non-finite numbers refused,
naming the key or field), JSON type names for messages, and "did you mean"
suggestions for mistyped ids and field names."""

from __future__ import annotations

import difflib
import json
import math
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


# --- strict decoding -------------------------------------------------------------------------


class StrictJsonError(ValueError):
    """JSON that parses but is refused: a key given twice in one object, or a number that is
    not finite (``NaN``, ``Infinity``, or one too large for a float). ``where`` is the JSON
    path of the object or field (``results[1].confidence``; ``""`` for the top level)."""

    def __init__(self, message: str, where: str):
        super().__init__(message)
        self.where = where


class _Refused(Exception):
    """Raised by the fast decoder's hooks: the text holds something strict JSON refuses."""


def _fast_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        raise _Refused
    return out


def _fast_float(token: str) -> float:
    x = float(token)
    if not math.isfinite(x):
        raise _Refused
    return x


def _fast_constant(token: str) -> Any:
    raise _Refused


class _Pairs(list[tuple[str, Any]]):
    """An object's key-value pairs as written (keys given twice kept), for the second pass."""


class _NonFinite:
    """Stands in for a non-finite number (its token as written) in the second pass."""

    __slots__ = ("token",)

    def __init__(self, token: str):
        self.token = token


def _marked_float(token: str) -> float | _NonFinite:
    x = float(token)
    return x if math.isfinite(x) else _NonFinite(token)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check(value: Any, path: str) -> None:
    """Raise :class:`StrictJsonError` for the first refused key or number, in document order."""
    if isinstance(value, _NonFinite):
        what = f"field {path!r}" if path else "the top-level value"
        raise StrictJsonError(f"{what} is {value.token}, not a finite number", path)
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, item in value:
            if key in seen:
                inside = f" in {path!r}" if path else ""
                raise StrictJsonError(f"key {key!r} given more than once{inside}", path)
            seen.add(key)
            _check(item, _child(path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check(item, f"{path}[{i}]")


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses keys given twice in one object and non-finite numbers
    (StrictJsonError, naming the key or field by its JSON path); syntax errors raise
    ``json.JSONDecodeError``.

    Both passes are ``json.loads`` with hooks: the first refuses at the first problem; only
    refused text is decoded a second time, keeping every pair, to say where the problem is."""
    try:
        return json.loads(
            text, object_pairs_hook=_fast_pairs, parse_float=_fast_float, parse_constant=_fast_constant
        )
    except _Refused:
        pass
    doc = json.loads(text, object_pairs_hook=_Pairs, parse_float=_marked_float, parse_constant=_NonFinite)
    _check(doc, "")
    raise AssertionError(
        "strict_loads: the first pass refused text the second pass accepts"
    )  # pragma: no cover
