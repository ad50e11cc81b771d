"""Checking JSON for people: bounded decoding (nesting deeper than :data:`MAX_JSON_DEPTH` and
lone UTF-16 surrogates refused, naming where), strict decoding (keys given twice and non-finite
numbers refused too, naming the key or field), JSON type names for messages, and "did you mean"
suggestions for mistyped ids and field names."""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from lmaudit.errors import StrictJsonError


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


class _Key:
    """A key of an object in the second pass, met in document order among the values."""

    __slots__ = ("name", "seen")

    def __init__(self, name: str, seen: set[str]):
        self.name, self.seen = name, seen


def _check(value: Any, path: str) -> None:
    """Raise :class:`StrictJsonError` for the first refused key or number, in document order
    (depth first on one stack: no recursion)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _NonFinite):
            what = f"field {where!r}" if where else "the top-level value"
            raise StrictJsonError(f"{what} is {item.token}, not a finite number", where)
        if isinstance(item, _Key):
            if item.name in item.seen:
                inside = f" in {where!r}" if where else ""
                raise StrictJsonError(f"key {item.name!r} given more than once{inside}", where)
            item.seen.add(item.name)
        elif isinstance(item, _Pairs):
            seen: set[str] = set()
            for key, child in reversed(item):
                stack += [(child, _child(where, key)), (_Key(key, seen), where)]
        elif isinstance(item, list):
            stack += reversed([(child, f"{where}[{i}]") for i, child in enumerate(item)])


# --- bounded decoding ------------------------------------------------------------------------

#: The deepest nesting of arrays and objects lmaudit decodes. Python's decoder recurses once per
#: level (RecursionError near the interpreter's limit, ~1000); lmaudit's inputs nest a few levels,
#: and code that walks a decoded value must not meet the limit either.
MAX_JSON_DEPTH = 256

# a JSON string (skipped whole: brackets inside it are text) or a bracket
_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]')
# a \uXXXX escape of a lone surrogate: a high one not followed by a low one, a low one not
# preceded by a high one. A match can be a false alarm (an escaped backslash before "ud800"):
# the decoded value is then searched and holds none.
_LONE_ESCAPE = re.compile(
    r"\\u[dD](?:[89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD])[c-fC-F][0-9a-fA-F]{2})"
)
_SURROGATE = re.compile(r"[\ud800-\udfff]")  # one in the text itself (text not decoded from UTF-8)


def _may_hold_lone_surrogate(text: str) -> bool:
    """Whether decoding ``text`` may give a lone surrogate (cheap tests first: most text has no
    ``\\u`` escape and is ASCII)."""
    return ("\\u" in text and _LONE_ESCAPE.search(text) is not None) or (
        not text.isascii() and _SURROGATE.search(text) is not None
    )


def _position(text: str, index: int) -> str:
    """``column C`` in one-line text, else ``line L, column C`` (both from 1)."""
    line = text.count("\n", 0, index)
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"column {column}" if "\n" not in text.rstrip("\r\n") else f"line {line + 1}, column {column}"


def _deep_at(text: str) -> StrictJsonError:
    """The error for text nested more than :data:`MAX_JSON_DEPTH` deep, naming where the first
    level past the bound opens (read from the text: strings are skipped, brackets counted)."""
    depth = 0
    for m in _TOKEN.finditer(text):
        c = text[m.start()]
        if c in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return StrictJsonError(
                    f"arrays and objects nested more than {MAX_JSON_DEPTH} deep (at "
                    f"{_position(text, m.start())}); lmaudit reads at most {MAX_JSON_DEPTH} levels",
                    "",
                )
        elif c in "]}":
            depth -= 1
    # the interpreter's recursion limit came first: the caller was already deep in the stack
    return StrictJsonError("arrays and objects nested deeper than Python's decoder can read here", "")


_CONTAINERS = (dict, list)


def _deeper_than_bound(value: Any) -> bool:
    """Whether a decoded value nests arrays and objects more than :data:`MAX_JSON_DEPTH` deep
    (one level at a time: no recursion)."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    for _ in range(MAX_JSON_DEPTH):
        if not level:
            return False
        below = []
        for item in level:
            below += [
                v for v in (item.values() if isinstance(item, dict) else item) if isinstance(v, _CONTAINERS)
            ]
        level = below
    return bool(level)


def _lone_surrogate(value: Any) -> StrictJsonError | None:
    """The error naming the first key or string (in document order) that holds a lone UTF-16
    surrogate: JSON's ``\\ud800`` escape decodes to one, and it is no text (it cannot be
    written as UTF-8)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as e:
                what = f"field {path!r}" if path else "the top-level value"
                return StrictJsonError(
                    f"{what} holds a lone UTF-16 surrogate ({item[e.start]!r} at character {e.start + 1}), "
                    "which is not text",
                    path,
                )
        elif isinstance(item, dict):
            children: list[tuple[Any, str]] = []
            for key, child in item.items():
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    inside = f" in {path!r}" if path else ""
                    return StrictJsonError(f"key {key!r}{inside} holds a lone UTF-16 surrogate", path)
                children.append((child, _child(path, key)))
            stack += reversed(children)
        elif isinstance(item, list):
            stack += reversed([(child, f"{path}[{i}]") for i, child in enumerate(item)])
    return None


def bounded_loads(text: str, **hooks: Any) -> Any:
    """``json.loads(text, **hooks)`` that refuses arrays and objects nested more than
    :data:`MAX_JSON_DEPTH` deep (naming the line and column) and lone UTF-16 surrogates
    (naming the key or field by its JSON path): StrictJsonError. Syntax errors raise
    ``json.JSONDecodeError``."""
    try:
        doc = json.loads(text, **hooks)
    except RecursionError:  # the decoder recursed to the interpreter's limit
        raise _deep_at(text) from None
    # a value nested that deep needs at least as many brackets: most texts are never walked
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _deeper_than_bound(doc):
        raise _deep_at(text)
    if _may_hold_lone_surrogate(text):
        lone = _lone_surrogate(doc)
        if lone is not None:
            raise lone
    return doc


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses keys given twice in one object and non-finite numbers
    (StrictJsonError, naming the key or field by its JSON path); syntax errors raise
    ``json.JSONDecodeError``.

    Both passes are ``json.loads`` with hooks: the first refuses at the first problem; only
    refused text is decoded a second time, keeping every pair, to say where the problem is.
    What :func:`bounded_loads` refuses is refused too."""
    try:
        return bounded_loads(
            text, object_pairs_hook=_fast_pairs, parse_float=_fast_float, parse_constant=_fast_constant
        )
    except _Refused:
        pass
    try:
        doc = json.loads(text, object_pairs_hook=_Pairs, parse_float=_marked_float, parse_constant=_NonFinite)
    except RecursionError:  # refused early, then found nested past the interpreter's limit
        raise _deep_at(text) from None
    _check(doc, "")
    raise AssertionError(
        "strict_loads: the first pass refused text the second pass accepts"
    )  # pragma: no cover
