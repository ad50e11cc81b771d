"""What the judge sees, built from config data: candidates, conditions, the wrapper, the rubric
and the prompt template; and the digests that freeze them before any judgment.

Response strings are carried byte for byte: they are read from JSON, placed between the
wrapper's prefix and suffix (when the condition wraps that side) and into the template by a
single-pass substitution, so a response that itself contains ``{response_b}`` or braces is
never expanded, and nothing is trimmed or normalised. The template ends with text of its own,
so a chat template that trims message content never reaches a response's last character.

The model mapping (which model wrote which side) is read only to unblind after judging; it
never enters a packet, a prompt or a request's ``meta``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmaudit.backends.base import Message
from lmaudit.errors import InputError
from lmaudit.provenance.digest import sha256_text
from lmaudit.provenance.io import check_fields, dumps_json, iter_jsonl, read_json
from lmaudit.provenance.jsoncheck import suggest

__all__ = [
    "Candidate",
    "Condition",
    "JudgeText",
    "build_packet",
    "check_template",
    "conditions_from",
    "displayed",
    "fill_template",
    "judge_messages",
    "load_candidates",
    "load_mapping",
    "packet_bytes",
    "packet_digests",
]

CANDIDATE_FIELDS = ("prompt_id", "prompt", "response_a", "response_b")
SIDES = ("A", "B")
_PLACEHOLDER = re.compile(r"\{(rubric|prompt|response_a|response_b)\}")


@dataclass(frozen=True)
class Candidate:
    """One frozen response pair, in its original A/B orientation."""

    prompt_id: str
    prompt: str
    response_a: str
    response_b: str


@dataclass(frozen=True)
class Condition:
    """A presentation: which displayed sides are wrapped, and whether A and B are exchanged."""

    id: str
    wrap: frozenset[str]
    swap: bool = False
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "wrap": sorted(self.wrap), "swap": self.swap, "description": self.description}


@dataclass(frozen=True)
class JudgeText:
    """The rubric, the judge prompt template, the wrapper and the readout turn (config data)."""

    rubric: str
    template: str
    prefix: str
    suffix: str
    readout_turn: str
    system: str | None = None

    @property
    def rubric_sha256(self) -> str:
        return sha256_text(self.rubric)


@dataclass(frozen=True)
class Sampling:
    """How each judgment is sampled: replicates, decoding settings, the study seed and the
    attempts allowed for a readable verdict."""

    k: int
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    max_attempts: int


def _str_field(obj: Mapping[str, Any], name: str, where: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise InputError(f"{where}: field {name!r} must be a string, got {type(value).__name__}")
    return value


def load_candidates(path: str | Path, ids: Sequence[str] | None = None) -> list[Candidate]:
    """The candidate set (JSONL: ``prompt_id``, ``prompt``, ``response_a``, ``response_b``).

    Any other field is an error: a candidate file names no model (that is the mapping's job).
    ``ids`` selects and orders a subset; an unknown id is an error."""
    out: list[Candidate] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        where = f"{path}: line {lineno}"
        check_fields(obj, where, optional=CANDIDATE_FIELDS)
        pid = _str_field(obj, "prompt_id", where)
        if not pid:
            raise InputError(f"{where}: field 'prompt_id' must not be empty")
        if pid in seen:
            raise InputError(f"{where}: field 'prompt_id' = {pid!r} repeats line {seen[pid]}")
        seen[pid] = lineno
        out.append(Candidate(pid, *(_str_field(obj, f, where) for f in CANDIDATE_FIELDS[1:])))
    if not out:
        raise InputError(f"{path}: no candidates")
    if ids is None:
        return out
    by = {c.prompt_id: c for c in out}
    missing = [i for i in ids if i not in by]
    if missing:
        hints = "".join(suggest(m, list(by)) for m in missing[:1])
        raise InputError(f"study.prompt_ids: {missing} are not in the candidate set {path}{hints}")
    return [by[i] for i in ids]


def load_mapping(path: str | Path, prompt_ids: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
    """The hidden mapping ``{prompt_id: {"A": model, "B": model}}`` (original orientation)."""
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a JSON object {{prompt_id: {{A: model, B: model}}}}")
    out: dict[str, dict[str, str]] = {}
    for pid, sides in raw.items():
        if not isinstance(sides, dict) or sorted(sides) != list(SIDES):
            raise InputError(f"{path}: prompt {pid!r}: expected exactly the fields 'A' and 'B'")
        for side in SIDES:
            if not isinstance(sides[side], str) or not sides[side]:
                raise InputError(f"{path}: prompt {pid!r}: field {side!r} must be a model name")
        out[str(pid)] = {s: str(sides[s]) for s in SIDES}
    missing = [p for p in prompt_ids or () if p not in out]
    if missing:
        raise InputError(f"{path}: no mapping for prompt(s) {missing}")
    return out


def conditions_from(specs: Sequence[Mapping[str, Any]], source: str) -> list[Condition]:
    out: list[Condition] = []
    for i, spec in enumerate(specs):
        cid = spec.get("id")
        if not isinstance(cid, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", cid):
            raise InputError(f"{source}: condition {i}: field 'id' must be letters, digits, _ or -")
        wrap = [str(w) for w in spec.get("wrap") or []]
        if any(w not in SIDES for w in wrap):
            raise InputError(f"{source}: condition {cid!r}: field 'wrap' = {wrap} may hold only 'A' and 'B'")
        out.append(
            Condition(cid, frozenset(wrap), bool(spec.get("swap")), str(spec.get("description") or ""))
        )
    ids = [c.id for c in out]
    if not out or len(set(ids)) != len(ids):
        raise InputError(f"{source}: field 'conditions' needs distinct condition ids, got {ids}")
    return out


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """Substitute ``{rubric}``, ``{prompt}``, ``{response_a}``, ``{response_b}`` in one pass.

    Only the template is scanned, so placeholder-like text inside a value stays as it is."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def displayed(c: Candidate, cond: Condition, text: JudgeText) -> tuple[str, str]:
    """The strings shown as Response A and Response B under ``cond``."""
    a, b = (c.response_b, c.response_a) if cond.swap else (c.response_a, c.response_b)
    if "A" in cond.wrap:
        a = text.prefix + a + text.suffix
    if "B" in cond.wrap:
        b = text.prefix + b + text.suffix
    return a, b


def judge_messages(c: Candidate, cond: Condition, text: JudgeText) -> tuple[Message, ...]:
    """The judge prompt: one self-contained user turn (after an optional system turn)."""
    a, b = displayed(c, cond, text)
    user = fill_template(
        text.template, {"rubric": text.rubric, "prompt": c.prompt, "response_a": a, "response_b": b}
    )
    head: tuple[Message, ...] = () if text.system is None else ({"role": "system", "content": text.system},)
    return (*head, {"role": "user", "content": user})


def check_template(text: JudgeText, source: str) -> None:
    """Each placeholder exactly once, and text of the template's own after the last one."""
    found = sorted(_PLACEHOLDER.findall(text.template))
    need = ["prompt", "response_a", "response_b", "rubric"]
    if found != need:
        raise InputError(f"{source}: field 'template' must use each of {need} once (found {found})")
    last = list(_PLACEHOLDER.finditer(text.template))[-1]
    if not text.template[last.end() :].strip():
        raise InputError(
            f"{source}: field 'template' must end with text of its own after {{{last.group(1)}}}, "
            "so that no chat template trims a response"
        )


def build_packet(cond: Condition, candidates: Sequence[Candidate], text: JudgeText) -> dict[str, Any]:
    """One condition's packet: exactly what the judge is shown, prompt by prompt."""
    items = []
    for c in candidates:
        a, b = displayed(c, cond, text)
        items.append(
            {
                "prompt_id": c.prompt_id,
                "response_a": a,
                "response_b": b,
                "messages": [dict(m) for m in judge_messages(c, cond, text)],
            }
        )
    return {
        "condition": cond.to_json(),
        "rubric_sha256": text.rubric_sha256,
        "wrapper": {"prefix": text.prefix, "suffix": text.suffix},
        "items": items,
    }


def packet_bytes(packet: Mapping[str, Any]) -> bytes:
    """The packet file's exact bytes (its manifest digest is their SHA-256)."""
    return dumps_json(packet).encode("utf-8")


def packet_digests(packets: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {cid: hashlib.sha256(packet_bytes(p)).hexdigest() for cid, p in packets.items()}
