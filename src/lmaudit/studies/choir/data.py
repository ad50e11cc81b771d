"""The choir study's protocol materials: probe banks, elicitation templates and personas.

Four files under ``data/choir/`` (DVC-tracked), read and validated here:

* ``targeted_bank.jsonl``: the targeted diagnostic probe bank, one stem a line:
  ``code`` (study code, e.g. ``RITQ-SOC-1``), ``legacy_id`` (e.g. ``Q1``), ``context`` (probe
  context, one of :data:`CONTEXTS`), ``title``, ``note`` (an editorial note in square
  brackets describing material shown before the question, or null) and ``stem`` (the question
  text). The seed's table cell is ``"{title}. {note} {stem}"`` (``note`` omitted when null);
  the wording is kept exactly, spelling and punctuation included.
* ``infinity_chat_100.jsonl``: the external prompt set, ``id`` (``H001``..``H100``),
  ``geometry`` (one of :data:`GEOMETRIES`), ``openness`` (``high``/``medium``/``low``) and
  ``text`` (verbatim).
* ``templates.json``: templates A, B and C as full texts with the one placeholder
  ``{QUESTION}``; B and C also record the block they add to A and where it goes.
* ``personas.jsonl``: ``id``, ``label``, ``hexaco`` (level per HEXACO dimension, or null),
  ``text`` (the system-prompt profile, or null) and ``origin``. The id ``none`` is the
  unconditioned condition and must have no text.

Every error names the file, the line (or template) and the field; ids given twice are refused.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lmaudit.errors import InputError
from lmaudit.provenance.io import check_fields, iter_jsonl, read_json
from lmaudit.provenance.jsoncheck import json_type

__all__ = [
    "CONTEXTS",
    "GEOMETRIES",
    "HEXACO",
    "NO_PERSONA",
    "OPENNESS",
    "PLACEHOLDER",
    "ChoirMaterials",
    "ExternalPrompt",
    "Persona",
    "Probe",
    "Template",
    "load_external_prompts",
    "load_materials",
    "load_personas",
    "load_targeted_bank",
    "load_templates",
]

CONTEXTS = (
    "Social Modelling",
    "Conversational Memory",
    "Human Welfare",
    "Self-description",
    "Meta-Inquiry",
    "Control",
)
GEOMETRIES = ("creative", "bounded", "constrained", "conceptual", "named answer", "advice")
OPENNESS = ("high", "medium", "low")
HEXACO = (
    "honesty_humility",
    "emotionality",
    "extraversion",
    "agreeableness",
    "conscientiousness",
    "openness",
)
HEXACO_LEVELS = ("low", "medium", "high")
PLACEHOLDER = "QUESTION"
NO_PERSONA = "none"
_Row = TypeVar("_Row")


@dataclass(frozen=True)
class Probe:
    code: str
    legacy_id: str
    context: str
    title: str
    note: str | None
    stem: str

    @property
    def seed_cell(self) -> str:
        """The probe as the seed's table prints it: title, editorial note, stem."""
        note = f"{self.note} " if self.note else ""
        return f"{self.title}. {note}{self.stem}"


@dataclass(frozen=True)
class ExternalPrompt:
    id: str
    geometry: str
    openness: str
    text: str


@dataclass(frozen=True)
class Template:
    id: str
    name: str
    text: str

    def render(self, question: str) -> str:
        return self.text.replace("{" + PLACEHOLDER + "}", question)


@dataclass(frozen=True)
class Persona:
    id: str
    label: str
    hexaco: dict[str, str] | None
    text: str | None
    origin: str


@dataclass(frozen=True)
class CuePair:
    """A matched cue-stripping pair: an Infinity-Chat prompt and our rewording of it without
    its lexical anchors (the words an answer would echo)."""

    original: str  # the Infinity-Chat prompt id
    id: str  # the stripped prompt's id
    text: str
    anchors: tuple[str, ...]


@dataclass(frozen=True)
class ChoirMaterials:
    targeted: tuple[Probe, ...]
    external: tuple[ExternalPrompt, ...]
    templates: dict[str, Template]
    personas: tuple[Persona, ...]
    cue_pairs: tuple[CuePair, ...] = ()


def _text(obj: dict[str, Any], key: str, where: str, *, nullable: bool = False) -> str | None:
    value = obj.get(key)
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise InputError(f"{where}: field {key!r} must be a string, got {json_type(value)}")
    if not value.strip():
        raise InputError(f"{where}: field {key!r} is empty")
    if value != value.strip():
        raise InputError(f"{where}: field {key!r} has leading or trailing whitespace")
    return value


def _choice(obj: dict[str, Any], key: str, where: str, allowed: Iterable[str]) -> str:
    value = _text(obj, key, where)
    options = tuple(allowed)
    if value not in options:
        raise InputError(f"{where}: field {key!r} is {value!r}, expected one of {', '.join(options)}")
    return str(value)


def _read_rows(
    path: Path, build: Callable[[dict[str, Any], str], _Row], id_of: Callable[[_Row], str]
) -> list[_Row]:
    rows: list[_Row] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        where = f"{path}: line {lineno}"
        row = build(obj, where)
        key = id_of(row)
        if key in seen:
            raise InputError(f"{where}: id {key!r} already given on line {seen[key]}")
        seen[key] = lineno
        rows.append(row)
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def _probe(obj: dict[str, Any], where: str) -> Probe:
    check_fields(obj, where, ("code", "legacy_id", "context", "title", "note", "stem"))
    code = str(_text(obj, "code", where))
    if not code.startswith("RITQ-"):
        raise InputError(f"{where}: field 'code' is {code!r}, expected a study code like 'RITQ-SOC-1'")
    return Probe(
        code=code,
        legacy_id=str(_text(obj, "legacy_id", where)),
        context=_choice(obj, "context", where, CONTEXTS),
        title=str(_text(obj, "title", where)),
        note=_text(obj, "note", where, nullable=True),
        stem=str(_text(obj, "stem", where)),
    )


def load_targeted_bank(path: str | Path) -> tuple[Probe, ...]:
    """The targeted probe bank; study codes and legacy ids are each unique."""
    path = Path(path)
    rows = _read_rows(path, _probe, lambda p: p.code)
    legacy: dict[str, str] = {}
    for p in rows:
        if p.legacy_id in legacy:
            raise InputError(
                f"{path}: {p.code}: legacy_id {p.legacy_id!r} already used by {legacy[p.legacy_id]}"
            )
        legacy[p.legacy_id] = p.code
    return tuple(rows)


def _external(obj: dict[str, Any], where: str) -> ExternalPrompt:
    check_fields(obj, where, ("id", "geometry", "openness", "text"))
    return ExternalPrompt(
        id=str(_text(obj, "id", where)),
        geometry=_choice(obj, "geometry", where, GEOMETRIES),
        openness=_choice(obj, "openness", where, OPENNESS),
        text=str(_text(obj, "text", where)),
    )


def load_external_prompts(path: str | Path, *, expected: int | None = 100) -> tuple[ExternalPrompt, ...]:
    """Infinity-Chat 100; ``expected`` (100) rows unless set to None."""
    path = Path(path)
    rows = _read_rows(path, _external, lambda p: p.id)
    if expected is not None and len(rows) != expected:
        raise InputError(f"{path}: {len(rows)} prompts, expected {expected}")
    return tuple(rows)


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def load_templates(path: str | Path) -> dict[str, Template]:
    """Templates by id; each holds the ``{QUESTION}`` placeholder exactly once and no other."""
    path = Path(path)
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a JSON object, got {json_type(doc)}")
    check_fields(doc, str(path), ("placeholders", "templates"))
    if doc["placeholders"] != [PLACEHOLDER]:
        raise InputError(
            f"{path}: field 'placeholders' must be [{PLACEHOLDER!r}], got {doc['placeholders']!r}"
        )
    entries = doc["templates"]
    if not isinstance(entries, dict) or not entries:
        raise InputError(f"{path}: field 'templates' must be a non-empty object")
    out: dict[str, Template] = {}
    for tid, entry in entries.items():
        where = f"{path}: template {tid!r}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object, got {json_type(entry)}")
        check_fields(entry, where, ("name", "text"), ("base", "addition", "insert_before", "position_source"))
        text = str(_text(entry, "text", where))
        try:
            names = _placeholders(text)
        except ValueError as e:
            raise InputError(f"{where}: field 'text' is not a valid template ({e})") from None
        token = "{" + PLACEHOLDER + "}"
        if names != {PLACEHOLDER} or text.count(token) != 1:
            raise InputError(f"{where}: field 'text' must hold {token} exactly once and no other placeholder")
        if "addition" in entry:
            addition = str(_text(entry, "addition", where))
            if addition not in text:
                raise InputError(f"{where}: field 'addition' does not appear in the template text")
        out[str(tid)] = Template(id=str(tid), name=str(_text(entry, "name", where)), text=text)
    return out


def _persona(obj: dict[str, Any], where: str) -> Persona:
    check_fields(obj, where, ("id", "label", "hexaco", "text", "origin"))
    pid = str(_text(obj, "id", where))
    text = _text(obj, "text", where, nullable=True)
    hexaco = obj["hexaco"]
    if pid == NO_PERSONA:
        if text is not None or hexaco is not None:
            raise InputError(f"{where}: persona {NO_PERSONA!r} must have null 'text' and 'hexaco'")
    else:
        if text is None:
            raise InputError(f"{where}: field 'text' must be a string for persona {pid!r}")
        if not isinstance(hexaco, dict) or set(hexaco) != set(HEXACO):
            raise InputError(f"{where}: field 'hexaco' must give a level for each of {', '.join(HEXACO)}")
        for dim, level in hexaco.items():
            if level not in HEXACO_LEVELS:
                raise InputError(
                    f"{where}: field 'hexaco.{dim}' is {level!r}, expected one of low, medium, high"
                )
    return Persona(
        id=pid,
        label=str(_text(obj, "label", where)),
        hexaco=dict(hexaco) if isinstance(hexaco, dict) else None,
        text=text,
        origin=str(_text(obj, "origin", where)),
    )


def load_personas(path: str | Path) -> tuple[Persona, ...]:
    """The personas, the unconditioned ``none`` among them."""
    path = Path(path)
    rows = _read_rows(path, _persona, lambda p: p.id)
    if NO_PERSONA not in {p.id for p in rows}:
        raise InputError(f"{path}: no persona with id {NO_PERSONA!r} (the unconditioned condition)")
    return tuple(rows)


def _cue_pair(obj: dict[str, Any], where: str) -> CuePair:
    check_fields(obj, where, ("original", "id", "text", "anchors"))
    anchors = obj["anchors"]
    if (
        not isinstance(anchors, list)
        or not anchors
        or not all(isinstance(a, str) and a.strip() for a in anchors)
    ):
        raise InputError(f"{where}: field 'anchors' must be a non-empty list of words")
    return CuePair(
        str(_text(obj, "original", where)),
        str(_text(obj, "id", where)),
        str(_text(obj, "text", where)),
        tuple(a.strip().lower() for a in anchors),
    )


def load_cue_pairs(path: str | Path, external: tuple[ExternalPrompt, ...]) -> tuple[CuePair, ...]:
    """The matched cue-stripping pairs; each original must be an Infinity-Chat prompt, each
    stripped id new."""
    path = Path(path)
    rows = _read_rows(path, _cue_pair, lambda p: p.id)
    known = {p.id: p.text for p in external}
    for pair in rows:
        where = f"{path}: pair {pair.id!r}"
        if pair.original not in known:
            raise InputError(f"{where}: field 'original' = {pair.original!r} is not an Infinity-Chat prompt")
        if pair.id in known:
            raise InputError(f"{where}: field 'id' is already an Infinity-Chat prompt id")
        missing = [a for a in pair.anchors if a not in known[pair.original].lower()]
        if missing:
            raise InputError(f"{where}: field 'anchors': {missing} do not occur in prompt {pair.original}")
    return tuple(rows)


def _profile(obj: dict[str, Any], where: str) -> tuple[str, str]:
    check_fields(obj, where, ("id", "text"))
    pid = str(_text(obj, "id", where))
    if pid == NO_PERSONA:
        raise InputError(f"{where}: field 'id': {NO_PERSONA!r} is the unconditioned condition, not a profile")
    return pid, str(_text(obj, "text", where))


def load_profiles(path: str | Path) -> dict[str, str]:
    """Persona profiles of imported lists (``study.profiles_path``, JSONL ``{"id", "text"}``):
    the texts their models were conditioned on, for the leakage checks."""
    return dict(_read_rows(Path(path), _profile, lambda p: p[0]))


def load_materials(root: str | Path) -> ChoirMaterials:
    """All files from ``root`` (normally ``data/choir``); ``cue_pairs.jsonl`` is optional."""
    root = Path(root)
    external = load_external_prompts(root / "infinity_chat_100.jsonl")
    pairs = root / "cue_pairs.jsonl"
    return ChoirMaterials(
        targeted=load_targeted_bank(root / "targeted_bank.jsonl"),
        external=external,
        templates=load_templates(root / "templates.json"),
        personas=load_personas(root / "personas.jsonl"),
        cue_pairs=load_cue_pairs(pairs, external) if pairs.exists() else (),
    )
