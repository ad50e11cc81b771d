"""The choir design: questions, conditions and the elicitation requests of every ensemble member.

A *condition* is how a list is elicited: an unconditioned template (``A``, ``B``; persona
``none``) or the persona template under one persona (``A|<persona>``). A *cell* is one member x
question x condition x temperature; it is one sampling request whose ``generations`` draws are
the cell's lists (each draw's seed fixed by the request seed and its index).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from lmaudit.backends.base import SampleRequest
from lmaudit.provenance.io import InputError
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.data import NO_PERSONA, ChoirMaterials, CuePair, load_materials

__all__ = ["Condition", "Question", "conditions", "member_name", "questions", "requests"]


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    info: dict[str, str]  # bank columns (geometry, openness / code, context, ...)


@dataclass(frozen=True)
class Condition:
    id: str
    template: str
    persona: str  # "none" for unconditioned lists

    @property
    def conditioned(self) -> bool:
        return self.persona != NO_PERSONA


def questions(s: ChoirStudyConfig, m: ChoirMaterials) -> list[Question]:
    if s.bank == "infinity":
        pool = [Question(p.id, p.text, {"geometry": p.geometry, "openness": p.openness}) for p in m.external]
    elif s.bank == "targeted":
        pool = [
            Question(p.code, p.stem, {"legacy_id": p.legacy_id, "context": p.context, "title": p.title})
            for p in m.targeted
        ]
    else:
        raise InputError(f"study: field 'bank' = {s.bank!r} is not infinity or targeted")
    by = {q.id: q for q in pool}
    chosen = pool
    if s.question_ids is not None:
        unknown = [q for q in s.question_ids if q not in by]
        if unknown:
            raise InputError(f"study: field 'question_ids': {unknown} are not in the {s.bank} bank")
        chosen = [by[q] for q in s.question_ids]
    return chosen + stripped_questions(s, m, chosen, by)


def cue_pairs(s: ChoirStudyConfig, m: ChoirMaterials) -> list[CuePair]:
    """The matched cue-stripping pairs the design asks for (``study.cue_pairs``)."""
    if not s.cue_pairs:
        return []
    if s.bank != "infinity":
        raise InputError(
            "study: field 'cue_pairs' needs bank=infinity (the pairs reword Infinity-Chat prompts)"
        )
    by = {p.original: p for p in m.cue_pairs}
    wanted = list(by) if list(s.cue_pairs) == ["all"] else list(s.cue_pairs)
    unknown = [q for q in wanted if q not in by]
    if unknown:
        raise InputError(
            f"study: field 'cue_pairs': {unknown} have no pair in {s.materials}/cue_pairs.jsonl ({sorted(by)})"
        )
    return [by[q] for q in dict.fromkeys(wanted)]


def stripped_questions(
    s: ChoirStudyConfig, m: ChoirMaterials, chosen: list[Question], by: dict[str, Question]
) -> list[Question]:
    """The originals of the pairs not already chosen, then every pair's stripped prompt."""
    pairs = cue_pairs(s, m)
    have = {q.id for q in chosen}
    extra = [by[p.original] for p in pairs if p.original not in have]
    return extra + [Question(p.id, p.text, {"stripped_of": p.original}) for p in pairs]


def conditions(s: ChoirStudyConfig, m: ChoirMaterials) -> list[Condition]:
    known = {p.id for p in m.personas}
    for field_name, ids in (("templates", s.templates), ("persona_template", [s.persona_template])):
        bad = [t for t in ids if t not in m.templates]
        if bad:
            raise InputError(f"study: field {field_name!r}: templates {bad} are not in {sorted(m.templates)}")
    bad = [p for p in s.personas if p not in known or p == NO_PERSONA]
    if bad:
        raise InputError(
            f"study: field 'personas': {bad} are not persona profiles ({sorted(known - {NO_PERSONA})})"
        )
    out = [Condition(t, t, NO_PERSONA) for t in dict.fromkeys(s.templates)]
    out += [Condition(f"{s.persona_template}|{p}", s.persona_template, p) for p in dict.fromkeys(s.personas)]
    if not out:
        raise InputError("study: the design has no condition (templates and personas are both empty)")
    return out


def member_name(model: dict[str, Any], i: int) -> str:
    name = model.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"study: field 'ensemble.members[{i}].name' must be a non-empty string")
    return name


def _seed(seed: int, question: str, condition: str, temperature: float) -> int:
    h = hashlib.sha256(f"{seed}:{question}:{condition}:{temperature!r}".encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


def requests(
    s: ChoirStudyConfig, m: ChoirMaterials, qs: list[Question], conds: list[Condition]
) -> list[SampleRequest]:
    """One sampling request per question x condition x temperature (the same for every member)."""
    personas = {p.id: p for p in m.personas}
    out = []
    for q in qs:
        for c in conds:
            if c.conditioned and "stripped_of" in q.info:
                continue  # cue stripping compares unconditioned lists only
            prompt = m.templates[c.template].render(q.text)
            persona_text = personas[c.persona].text if c.conditioned else None
            shots: tuple[dict[str, str], ...] = ()
            for ex in s.exemplars:
                shots += (
                    {"role": "user", "content": m.templates[c.template].render(ex.question)},
                    {"role": "assistant", "content": ex.answer},
                )
            messages: tuple[dict[str, str], ...] = (
                (({"role": "system", "content": str(persona_text)},) if persona_text else ())
                + shots
                + ({"role": "user", "content": prompt},)
            )
            for t in s.temperatures:
                out.append(
                    SampleRequest(
                        messages=messages,
                        n=s.generations,
                        temperature=float(t),
                        top_p=1.0,
                        max_tokens=s.max_tokens,
                        seed=_seed(s.seed, q.id, c.id, float(t)),
                        meta={
                            "question": q.id,
                            "question_text": q.text,
                            "condition": c.id,
                            "template": c.template,
                            "persona": c.persona,
                            "items": s.items_per_list,
                        },
                    )
                )
    return out


def materials(s: ChoirStudyConfig) -> ChoirMaterials:
    return load_materials(s.materials)
