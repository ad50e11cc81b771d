"""Checking JSON for people: strict decoding (keys given twice and non-finite numbers refused,
naming the key or field and its line), JSON type names for messages, and "did you mean"
suggestions for mistyped ids and field names."""

from __future__ import annotations

import difflib
import json
import json.decoder
import json.scanner
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
    not finite (``NaN``, ``Infinity``, or one too large for a float). ``line`` is 1-based
    within the decoded text."""

    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


class _NonFinite:
    """Stands in for a non-finite number until the object holding it names the field."""

    __slots__ = ("pos", "token")

    def __init__(self, token: str):
        self.token = token
        self.pos = -1


def _float(token: str) -> float | _NonFinite:
    x = float(token)
    return x if math.isfinite(x) else _NonFinite(token)


def _bad(value: Any, path: str) -> tuple[_NonFinite, str] | None:
    """The first non-finite number in ``value`` outside nested objects (checked on their own)."""
    if isinstance(value, _NonFinite):
        return value, path
    if isinstance(value, list):
        for i, v in enumerate(value):
            hit = _bad(v, f"{path}[{i}]")
            if hit is not None:
                return hit
    return None


def _line(s: str, pos: int) -> int:
    return s.count("\n", 0, max(0, pos)) + 1


def _parse_object(
    s_and_end: tuple[str, int],
    strict: bool,
    scan_once: Any,
    object_hook: Any,
    object_pairs_hook: Any,
    memo: Any = None,
) -> tuple[dict[str, Any], int]:
    s, start = s_and_end
    starts: list[int] = []

    def scan(text: str, idx: int) -> tuple[Any, int]:
        value, end = scan_once(text, idx)
        starts.append(idx)
        for item in (value, *(value if isinstance(value, list) else ())):
            if isinstance(item, _NonFinite) and item.pos < 0:
                item.pos = idx
        return value, end

    pairs, end = json.decoder.JSONObject(  # type: ignore[attr-defined]
        s_and_end, strict, scan, None, lambda p: p, memo
    )
    out: dict[str, Any] = {}
    for i, (key, value) in enumerate(pairs):
        if key in out:
            raise StrictJsonError(f"key {key!r} given more than once", _line(s, starts[i]))
        hit = _bad(value, key)
        if hit is not None:
            bad, field = hit
            raise StrictJsonError(
                f"field {field!r} is {bad.token}, not a finite number",
                _line(s, bad.pos if bad.pos >= 0 else start),
            )
        out[key] = value
    return out, end


def _parse_array(s_and_end: tuple[str, int], scan_once: Any) -> tuple[list[Any], int]:
    def scan(text: str, idx: int) -> tuple[Any, int]:
        value, end = scan_once(text, idx)
        if isinstance(value, _NonFinite) and value.pos < 0:
            value.pos = idx
        return value, end

    out: tuple[list[Any], int] = json.decoder.JSONArray(s_and_end, scan)  # type: ignore[attr-defined]
    return out


def _decoder() -> json.JSONDecoder:
    dec = json.JSONDecoder(parse_constant=_NonFinite, parse_float=_float)
    dec.parse_object = _parse_object  # type: ignore[attr-defined]
    dec.parse_array = _parse_array  # type: ignore[attr-defined]
    dec.scan_once = json.scanner.py_make_scanner(dec)  # type: ignore[attr-defined]
    return dec


_STRICT = _decoder()


class _Refused(Exception):
    pass


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


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses duplicate keys and non-finite numbers (StrictJsonError,
    naming the key or field and its line); syntax errors raise ``json.JSONDecodeError``.

    Clean text takes the C decoder; only refused text is decoded again, in pure Python, to
    say where the problem is."""
    try:
        return json.loads(
            text, object_pairs_hook=_fast_pairs, parse_float=_fast_float, parse_constant=_fast_constant
        )
    except _Refused:
        pass
    doc = _STRICT.decode(text)
    hit = _bad(doc, "")
    if hit is not None:  # a non-finite number outside any object, e.g. a bare list
        bad, where = hit
        raise StrictJsonError(
            f"value {where or '(top level)'} is {bad.token}, not a finite number", _line(text, bad.pos)
        )
    return doc
