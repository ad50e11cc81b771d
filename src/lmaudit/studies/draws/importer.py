"""Draw sequences made elsewhere: the JSONL import format, its validation, the exclusion
patterns and prefix de-duplication (see docs/draws.md).

One JSON object a line, one sequence each::

    {"family": "gpt-oss:120b", "source": "E-002", "condition": "baseline", "probe": "p07",
     "draws": ["A", "B", "B", "A"]}

Required: ``family``, ``source``, ``condition``, ``probe`` (non-empty strings) and ``draws``
(a non-empty list of answers in the order drawn, all strings or all integers). Optional:
``raw`` (the raw texts, one per draw), ``replicate`` (an integer that tells apart sequences of
the same family, condition and probe that are not copies of one another) and ``meta`` (any
object, carried along). The measurement rows the study writes add ``kind``, ``seed`` and
``line``. Any other field is an error, so a misspelt field never passes silently.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError
from lmaudit.provenance.io import iter_jsonl

__all__ = ["ImportRows", "SequenceRecord", "dedup_prefixes", "exclude", "read_import", "validate_record"]

REQUIRED = ("family", "source", "condition", "probe", "draws")
OPTIONAL = ("raw", "replicate", "meta", "kind", "seed", "line")
ALLOWED = frozenset(REQUIRED + OPTIONAL)
Answer = str | int


@dataclass(frozen=True, slots=True)
class SequenceRecord:
    family: str
    source: str
    condition: str
    probe: str
    draws: tuple[Answer, ...]
    replicate: int | None = None

    @property
    def key(self) -> tuple[str, str, str, int | None]:
        """Sequences sharing this key are candidates for prefix de-duplication."""
        return (self.family, self.condition, self.probe, self.replicate)


def _kind(x: Any) -> str | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, str):
        return "string"
    if isinstance(x, int):
        return "integer"
    return None


def _check_answers(draws: list[Any], where: str) -> None:
    """InputError naming the first draw that is neither a string nor an integer, or the first
    of another type than the draws before it."""
    first: tuple[int, str] | None = None
    for i, x in enumerate(draws):
        kind = _kind(x)
        if kind is None:
            raise InputError(f"{where}: field 'draws[{i}]' must be a string or an integer, got {x!r}")
        if first is None:
            first = (i, kind)
        elif kind != first[1]:
            raise InputError(
                f"{where}: field 'draws' mixes answer types ({first[1]} at draws[{first[0]}], "
                f"{kind} at draws[{i}]); use one type per sequence"
            )


def validate_record(obj: Any, where: str, memo: dict[Any, Any] | None = None) -> SequenceRecord:
    """One sequence record, or InputError naming ``where`` (file and line) and the field.

    With ``memo``, equal names and answers of all the records made with it are one object
    each (a record then holds its draws as a tuple of shared answers, not of fresh strings)."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(obj.keys() - ALLOWED)
    if unknown:
        raise InputError(f"{where}: unknown field(s) {unknown} (allowed: {', '.join(REQUIRED + OPTIONAL)})")
    for key in REQUIRED:
        if key not in obj:
            raise InputError(f"{where}: missing field {key!r}")
    for key in REQUIRED[:4]:
        if not isinstance(obj[key], str) or not obj[key].strip():
            raise InputError(f"{where}: field {key!r} must be a non-empty string, got {obj[key]!r}")
    draws = obj["draws"]
    if not isinstance(draws, list):
        raise InputError(f"{where}: field 'draws' must be a list of answers, got {type(draws).__name__}")
    if not draws:
        raise InputError(f"{where}: field 'draws' is empty (a sequence needs at least one answer)")
    if {type(x) for x in draws} not in ({str}, {int}):  # all strings or all integers pass at once
        _check_answers(draws, where)
    raw = obj.get("raw")
    if raw is not None and (
        not isinstance(raw, list) or len(raw) != len(draws) or not all(isinstance(t, str) for t in raw)
    ):
        raise InputError(f"{where}: field 'raw' must be a list of {len(draws)} strings (one per draw)")
    rep = obj.get("replicate")
    if rep is not None and (isinstance(rep, bool) or not isinstance(rep, int) or rep < 0):
        raise InputError(f"{where}: field 'replicate' must be an integer >= 0, got {rep!r}")
    if obj.get("meta") is not None and not isinstance(obj["meta"], dict):
        raise InputError(f"{where}: field 'meta' must be an object")
    if memo is None:
        return SequenceRecord(obj["family"], obj["source"], obj["condition"], obj["probe"], tuple(draws), rep)

    def one(x: Any) -> Any:
        return memo.setdefault(x, x)

    return SequenceRecord(
        one(obj["family"]),
        one(obj["source"]),
        one(obj["condition"]),
        one(obj["probe"]),
        tuple(map(one, draws)),
        rep,
    )


class ImportRows:
    """An import file's records as measurement rows (each with its ``kind`` and ``line``).

    Made, it has read and validated the whole file line by line, keeping only the number of
    records, so every error comes before any output; iterated, it reads the file again and
    yields one row at a time. A file changed in between is refused (InputError)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._n = sum(1 for _ in self._records())
        if not self._n:
            raise InputError(f"{path}: no sequences (the file is empty)")

    def _records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for line, obj in iter_jsonl(self.path):
            validate_record(obj, f"{self.path}: line {line}")
            yield line, obj

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[dict[str, Any]]:
        n = 0
        for line, obj in self._records():
            n += 1
            yield {**obj, "kind": "sequence", "line": line}
        if n != self._n:
            raise InputError(f"{self.path}: changed while read ({self._n} records, then {n})")


def read_import(path: str | Path) -> ImportRows:
    """The file's records as measurement rows, validated (:class:`ImportRows`)."""
    return ImportRows(path)


def exclude(
    records: Iterable[SequenceRecord], patterns: Sequence[str]
) -> tuple[list[SequenceRecord], dict[str, int]]:
    """Drop records whose condition matches a pattern (fnmatch, case-sensitive); counts per pattern."""
    kept: list[SequenceRecord] = []
    dropped = {p: 0 for p in patterns}
    for r in records:
        hit = next((p for p in patterns if fnmatch.fnmatchcase(r.condition, p)), None)
        if hit is None:
            kept.append(r)
        else:
            dropped[hit] += 1
    return kept, dropped


def dedup_prefixes(records: Sequence[SequenceRecord]) -> tuple[list[SequenceRecord], list[SequenceRecord]]:
    """Within each key (family, condition, probe, replicate), drop every sequence equal to or a
    prefix of another; the longer is kept (of equal ones, the first in input order).
    Returns ``(kept, dropped)``, kept in input order."""
    by_key: dict[tuple[str, str, str, int | None], list[int]] = {}
    for i, r in enumerate(records):
        by_key.setdefault(r.key, []).append(i)
    drop: set[int] = set()
    for idx in by_key.values():
        if len(idx) < 2:
            continue
        # the kept sequences as a trie: every path from the root is a prefix of a kept
        # sequence, so a sequence is dropped exactly when it walks the trie to its end (one
        # step per draw, whatever the number of sequences kept)
        trie: dict[Answer, dict[Any, Any]] = {}
        for i in sorted(idx, key=lambda i: (-len(records[i].draws), i)):
            node = trie
            covered = True
            for a in records[i].draws:
                if a not in node:
                    covered = False
                node = node.setdefault(a, {})
            if covered:
                drop.add(i)
    return (
        [r for i, r in enumerate(records) if i not in drop],
        [r for i, r in enumerate(records) if i in drop],
    )
