"""Typed results: the base every result record derives from, the one :class:`Interval` and
the one :class:`FileDigest` (a file by its path and SHA-256).

A result record is a class deriving from :class:`JsonRecord`, which makes it a frozen
dataclass (``class Row(JsonRecord, kw_only=True)`` passes dataclass options; typed through
``dataclass_transform``, PEP 681, so mypy checks its constructor). Its JSON form is
written by :meth:`JsonRecord.to_json` and read back, checked field by field, by
:meth:`JsonRecord.from_json`; both go through pydantic's ``TypeAdapter`` over the dataclass,
so the record's annotations are its schema:

- an unknown key is an error (``extra="forbid"``) and types are strict (an int is never read as
  a string, nor a float as an int), so ``from_json`` then ``to_json`` gives back the same bytes;
- a field whose JSON key is not a Python name carries ``Field(alias=...)``;
- a key that is absent rather than null carries :data:`OMIT_NONE` and defaults to None.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import Field as DataclassField
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import core_schema
from typing_extensions import dataclass_transform

from lmaudit.errors import InputError

__all__ = ["OMIT_NONE", "FileDigest", "Interval", "JsonRecord"]

# ``Annotated[X | None, OMIT_NONE] = None``: the key is left out of the JSON when None
OMIT_NONE: Any = Field(default=None, exclude_if=lambda v: v is None)


@dataclass(frozen=True)
class Interval:
    """A closed interval ``[lo, hi]`` (a confidence interval, a range of values); written as
    the two-element list ``[lo, hi]``."""

    lo: float
    hi: float

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def contains(self, x: float, tol: float = 0.0) -> bool:
        return self.lo - tol <= x <= self.hi + tol

    def to_json(self) -> list[float]:
        return [self.lo, self.hi]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        pair = core_schema.tuple_schema([core_schema.float_schema(), core_schema.float_schema()])
        return core_schema.no_info_after_validator_function(
            lambda v: cls(v[0], v[1]),
            pair,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda i: [i.lo, i.hi], return_schema=core_schema.list_schema(core_schema.float_schema())
            ),
        )


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type) -> TypeAdapter[Any]:
    """The class's adapter, built once (building one walks every nested annotation)."""
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def _non_finite(doc: Any, path: str = "") -> tuple[str, float] | None:
    """The first NaN or infinite number in a JSON-ready document, with its dotted path."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return path or "<top>", doc
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        found = _non_finite(value, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def _where(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<top>"
    return f"field {loc!r}: {first['msg']}"


@dataclass_transform(frozen_default=True, field_specifiers=(field, DataclassField))
class JsonRecord:
    """Base of typed result records: each subclass is made a frozen dataclass (the class
    keywords ``kw_only``, ``eq`` and ``order`` are dataclass options); JSON out and in, checked.
    A subclass is not decorated with ``@dataclass`` again."""

    __dataclass_fields__: ClassVar[dict[str, DataclassField[Any]]]

    # NaN and infinity are kept as floats when dumped, so that to_json refuses them (JSON has
    # neither) instead of writing them as null, which would not read back as a number
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid", strict=True, ser_json_inf_nan="constants"
    )

    def __init_subclass__(
        cls, *, kw_only: bool = False, eq: bool = True, order: bool = False, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(frozen=True, kw_only=kw_only, eq=eq, order=order)(cls)

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready form: plain dicts, lists, str, int, float, bool and None. A number
        that is NaN or infinite is refused (ValueError naming the field)."""
        out = _adapter(type(self)).dump_python(self, mode="json", by_alias=True)
        assert isinstance(out, dict)
        bad = _non_finite(out)
        if bad is not None:
            path, value = bad
            raise ValueError(f"{type(self).__name__}: field {path!r} is {value}, which JSON cannot hold")
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | str | bytes, source: str = "<results>") -> Self:
        """The record a JSON document (parsed, or its text) holds; :class:`InputError` naming
        ``source`` and the first field that does not fit."""
        text = doc if isinstance(doc, (str, bytes)) else json.dumps(doc, allow_nan=False)
        try:
            out = _adapter(cls).validate_json(text)
        except ValidationError as err:
            raise InputError(f"{source}: not a {cls.__name__}: {_where(err)}") from None
        assert isinstance(out, cls)
        return out


class FileDigest(JsonRecord):
    """A file a run read, by its path and the SHA-256 of its bytes."""

    path: str
    sha256: str
