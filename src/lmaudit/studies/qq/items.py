"""QQ item banks: the JSON format, its typed schema and validation.

A bank is one JSON file (format: ``docs/item_bank.md``)::

    {"bank": "pilot", "version": "1.0", "items": [{"id": "s1-01", "stratum": "S1", ...}, ...]}

``load_bank`` checks the whole file before anything is measured and reports *every* problem
in one ``ItemBankError``, one line per problem::

    <file>: item '<id>' (index <i>): field '<field>': <what is wrong>
    <file>: <file-level problem>

Selecting the items of a run from a bank is :mod:`lmaudit.studies.qq.selection`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError, ItemBankError, StrictJsonError
from lmaudit.provenance.io import read_input
from lmaudit.provenance.jsoncheck import JsonObject, bounded_loads, duplicate_keys, json_type, suggest

STRATA = ("S1", "S2", "S3")
YES_NO = ("Yes", "No")
YEAR_MIN, YEAR_MAX = 1900, 2100
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
PILOT_BANK = Path("data/qq/items/pilot.json")  # repository-relative path of the shipped bank

REQUIRED_FIELDS = ("id", "stratum", "pair_type", "options", "question_a", "question_b")
OPTIONAL_FIELDS: dict[str, Any] = {
    "reference_year": None,
    "sensitive": False,
    "track_p": False,
    "header": None,
    "vignette": None,
    "matched_to": None,
    "monitored": False,
    "notes": "",
}
ITEM_FIELDS = REQUIRED_FIELDS + tuple(OPTIONAL_FIELDS)
TOP_LEVEL_REQUIRED = ("bank", "version", "items")
TOP_LEVEL_FIELDS = (*TOP_LEVEL_REQUIRED, "description")

_Report = Callable[[str, str], None]  # (field, what is wrong) -> record one problem


@dataclass(frozen=True)
class Item:
    """One question pair. Semantic ``y`` is ``options[0]``, ``n`` is ``options[1]``."""

    id: str
    stratum: str  # "S1" historical | "S2" name-swapped control | "S3" novel Yes/No vignette
    pair_type: str  # free text, e.g. "consistency", "contrast", "reciprocity"
    options: tuple[str, str]
    question_a: str
    question_b: str
    reference_year: int | None = None  # Track P persona year
    sensitive: bool = False
    track_p: bool = False
    header: str | None = None  # historical header, shown once before the first question (Track M)
    vignette: str | None = None  # shown once, in the first user turn
    matched_to: str | None = None  # S2 only: the S1 item this controls for
    monitored: bool = False
    notes: str = ""  # where the wording comes from

    @property
    def semantic(self) -> dict[str, str]:
        """Semantic coordinate -> option text: ``{"y": options[0], "n": options[1]}``."""
        return {"y": self.options[0], "n": self.options[1]}

    @property
    def yes_no_labels(self) -> bool:
        """True when answered with the canonical Yes/No labels (S3) instead of mapped A/B."""
        return self.stratum == "S3"

    def question(self, which: str) -> str:
        """The wording of question ``"A"`` or ``"B"``."""
        if which == "A":
            return self.question_a
        if which == "B":
            return self.question_b
        raise ValueError(f"question must be 'A' or 'B', got {which!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            name: (list(self.options) if name == "options" else getattr(self, name)) for name in ITEM_FIELDS
        }


@dataclass(frozen=True)
class ItemBank:
    name: str
    version: str
    items: tuple[Item, ...]
    path: str
    description: str = ""
    raw: bytes = field(default=b"", repr=False, compare=False)  # the file's bytes, as read

    @property
    def digest(self) -> str:
        """SHA-256 (hex) of the bank file's bytes."""
        return hashlib.sha256(self.raw).hexdigest()

    @property
    def ids(self) -> list[str]:
        return [it.id for it in self.items]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Item]:
        return iter(self.items)

    def __contains__(self, item_id: object) -> bool:
        return any(it.id == item_id for it in self.items)

    def __getitem__(self, item_id: str) -> Item:
        for it in self.items:
            if it.id == item_id:
                return it
        raise KeyError(f"no item {item_id!r} in bank {self.name!r} ({self.path}){suggest(item_id, self.ids)}")


# --- loading -------------------------------------------------------------------------------


def load_bank(path: str | Path) -> ItemBank:
    """Read and validate an item bank; raise ``ItemBankError`` listing every problem."""
    where = str(path)
    try:
        raw = read_input(path)
    except InputError as exc:
        raise ItemBankError(where, [str(exc)]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ItemBankError(where, [f"{where}: not UTF-8 text (byte {exc.start})"]) from exc
    try:
        doc = bounded_loads(text, object_pairs_hook=JsonObject.from_pairs)
    except json.JSONDecodeError as exc:
        msg = f"{where}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        raise ItemBankError(where, [msg]) from exc
    except StrictJsonError as exc:
        raise ItemBankError(where, [f"{where}: {exc}"]) from None

    problems: list[str] = []
    if not isinstance(doc, dict):
        raise ItemBankError(where, [f"{where}: top level must be a JSON object, got {json_type(doc)}"])
    problems += [f"{where}: key {k!r} given more than once" for k in duplicate_keys(doc)]
    for key in doc:
        if key not in TOP_LEVEL_FIELDS:
            problems.append(f"{where}: unknown top-level field {key!r}{suggest(key, TOP_LEVEL_FIELDS)}")
    name, version, description = doc.get("bank"), doc.get("version"), doc.get("description", "")
    for key, value in (("bank", name), ("version", version)):
        if key not in doc:
            problems.append(f"{where}: missing top-level field {key!r}")
        elif not isinstance(value, str) or not value.strip():
            problems.append(
                f"{where}: top-level field {key!r} must be a non-empty string, got {json_type(value)}"
            )
    if not isinstance(description, str):
        problems.append(
            f"{where}: top-level field 'description' must be a string, got {json_type(description)}"
        )
    entries = doc.get("items")
    if "items" not in doc:
        problems.append(f"{where}: missing top-level field 'items' (the list of question pairs)")
    elif not isinstance(entries, list):
        problems.append(f"{where}: top-level field 'items' must be a list, got {json_type(entries)}")
    elif not entries:
        problems.append(f"{where}: 'items' is empty: a bank needs at least one item")
    if not isinstance(entries, list) or not entries:
        raise ItemBankError(where, problems)

    items = [_check_item(where, i, entry, problems) for i, entry in enumerate(entries)]
    _check_across(where, entries, items, problems)
    if problems:
        raise ItemBankError(where, problems)
    return ItemBank(
        name=str(name),
        version=str(version),
        items=tuple(it for it in items if it is not None),
        path=where,
        description=str(description),
        raw=raw,
    )


def _check_item(where: str, index: int, entry: Any, problems: list[str]) -> Item | None:
    raw_id = entry.get("id") if isinstance(entry, dict) else None
    label = (
        f"{where}: item {raw_id!r} (index {index})"
        if isinstance(raw_id, str)
        else f"{where}: item '?' (index {index})"
    )
    if not isinstance(entry, dict):
        problems.append(f"{label}: must be a JSON object, got {json_type(entry)}")
        return None
    n_before = len(problems)

    def bad(name: str, what: str) -> None:
        problems.append(f"{label}: field '{name}': {what}")

    for key in duplicate_keys(entry):
        bad(key, "given more than once")
    for key in entry:
        if key not in ITEM_FIELDS:
            bad(key, f"unknown field{suggest(key, ITEM_FIELDS)}")
    for key in REQUIRED_FIELDS:
        if key not in entry:
            bad(key, "missing (required)")
    v = {**OPTIONAL_FIELDS, **entry}

    if "id" in entry and not (isinstance(v["id"], str) and ID_PATTERN.match(v["id"])):
        bad(
            "id",
            f"must match {ID_PATTERN.pattern} (lower-case letters, digits, '.', '_', '-'), got {v['id']!r}",
        )
    if "stratum" in entry and v["stratum"] not in STRATA:
        bad("stratum", f"must be one of {', '.join(STRATA)}, got {v['stratum']!r}")
    if "pair_type" in entry:
        _text(v["pair_type"], "pair_type", bad, nullable=False)
    if "options" in entry:
        _check_options(v["options"], v.get("stratum"), bad)
    for key in ("question_a", "question_b"):
        if key in entry:
            _text(v[key], key, bad, nullable=False)
    qa, qb = v.get("question_a"), v.get("question_b")
    if isinstance(qa, str) and isinstance(qb, str) and qa.strip() and qa.strip() == qb.strip():
        bad("question_b", "must differ from question_a")

    year = v["reference_year"]
    if year is not None and (not isinstance(year, int) or isinstance(year, bool)):
        bad("reference_year", f"must be an integer year or null, got {json_type(year)}")
    elif year is not None and not YEAR_MIN <= year <= YEAR_MAX:
        bad("reference_year", f"must lie in {YEAR_MIN}..{YEAR_MAX}, got {year}")
    for key in ("sensitive", "track_p", "monitored"):
        if not isinstance(v[key], bool):
            bad(key, f"must be true or false, got {json_type(v[key])}")
    if v["track_p"] is True and year is None:
        bad("reference_year", "required for a track_p item (the Track P persona needs a year)")
    for key in ("header", "vignette"):
        _text(v[key], key, bad, nullable=True)
    if not isinstance(v["notes"], str):
        bad("notes", f"must be a string, got {json_type(v['notes'])}")
    matched = v["matched_to"]
    if matched is not None and not isinstance(matched, str):
        bad("matched_to", f"must be an item id or null, got {json_type(matched)}")
    elif matched is not None and v.get("stratum") in ("S1", "S3"):
        bad("matched_to", f"only S2 items are matched to an S1 item; this item is {v['stratum']}")
    elif matched is None and v.get("stratum") == "S2":
        bad("matched_to", "required for an S2 item: name the S1 item it is a name-swapped control for")

    if len(problems) > n_before:
        return None
    return Item(**{key: v[key] for key in ITEM_FIELDS if key != "options"}, options=tuple(v["options"]))


def _check_options(opts: Any, stratum: Any, bad: _Report) -> None:
    if not isinstance(opts, list) or len(opts) != 2:
        got = f"{len(opts)} entries" if isinstance(opts, list) else json_type(opts)
        bad("options", f"must be a list of exactly two option strings, got {got}")
        return
    n_bad = 0
    for j, opt in enumerate(opts):
        if not isinstance(opt, str) or not opt.strip():
            bad("options", f"option {j + 1} must be a non-empty string, got {json_type(opt)} {opt!r}")
            n_bad += 1
        elif opt != opt.strip():
            bad("options", f"option {j + 1} {opt!r} has leading or trailing whitespace")
            n_bad += 1
    if n_bad:
        return
    if opts[0].casefold() == opts[1].casefold():
        bad("options", f"the two options must differ, got {opts[0]!r} twice")
    elif stratum == "S3" and tuple(opts) != YES_NO:
        bad("options", f'S3 items are answered Yes/No: options must be ["Yes", "No"], got {opts!r}')


def _text(value: Any, key: str, bad: _Report, *, nullable: bool) -> None:
    if value is None and nullable:
        return
    if not isinstance(value, str):
        bad(key, f"must be a string{' or null' if nullable else ''}, got {json_type(value)}")
    elif not value.strip():
        bad(key, "must not be empty" + (" (use null for none)" if nullable else ""))
    elif value != value.strip():
        bad(key, "has leading or trailing whitespace")


def _check_across(where: str, entries: list[Any], items: list[Item | None], problems: list[str]) -> None:
    first_index: dict[str, int] = {}
    for i, entry in enumerate(entries):
        item_id = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(item_id, str):
            continue
        if item_id in first_index:
            problems.append(
                f"{where}: item {item_id!r} (index {i}): field 'id': duplicate id "
                f"(already used by index {first_index[item_id]})"
            )
        else:
            first_index[item_id] = i
    by_id = {it.id: it for it in items if it is not None}
    known = list(first_index)
    for i, it in enumerate(items):
        if it is None or it.matched_to is None:
            continue
        label = f"{where}: item {it.id!r} (index {i}): field 'matched_to'"
        target = by_id.get(it.matched_to)
        if it.matched_to not in known:
            problems.append(f"{label}: no item {it.matched_to!r} in this bank{suggest(it.matched_to, known)}")
        elif target is None:
            continue  # the target exists but is itself invalid; its own problems are reported
        elif target.stratum != "S1":
            problems.append(
                f"{label}: {it.matched_to!r} is an {target.stratum} item; S2 items match an S1 item"
            )
        elif target.options != it.options:
            problems.append(
                f"{where}: item {it.id!r} (index {i}): field 'options': {list(it.options)} differ from "
                f"{list(target.options)} of its matched S1 item {target.id!r} "
                "(a name-swapped control keeps the options of its S1 item)"
            )


__all__ = [
    "ID_PATTERN",
    "ITEM_FIELDS",
    "OPTIONAL_FIELDS",
    "PILOT_BANK",
    "REQUIRED_FIELDS",
    "STRATA",
    "YES_NO",
    "Item",
    "ItemBank",
    "load_bank",
]
