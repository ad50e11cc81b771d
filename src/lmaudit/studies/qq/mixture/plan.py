"""What a mixture estimand asks (``estimand=mixture``): the persona bank, the components and their
weights, the persona cells, the plan's mixture section and the measurement.

A component is a persona of the bank at a temperature over the base estimand. Personas enter
the prompt through the system prompt (after the framing's own, so Track P's year framing
composes with them); the ``none`` persona is the framing's system prompt alone, i.e. the plain
estimand's cells. On the log-prob base every temperature of a persona reads the same forward
pass (:func:`lmaudit.studies.qq.mixture.estimand.temper`); on the sampled base each (persona,
temperature) is sampled with its own seeds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lmaudit.backends.cached import CachedBackend
from lmaudit.errors import InputError
from lmaudit.provenance.io import check_fields, iter_jsonl
from lmaudit.studies.qq.config import EstimandConfig, FramingConfig, MappingConfig, MixtureConfig
from lmaudit.studies.qq.items import ID_PATTERN, Item
from lmaudit.studies.qq.mixture.estimand import check_weights
from lmaudit.studies.qq.positions import measure_logprob, measure_sampled
from lmaudit.studies.qq.protocol import Cell, build_cells

__all__ = [
    "NO_PERSONA",
    "Component",
    "Persona",
    "components_of",
    "load_personas",
    "measure_mixture",
    "mixture_plan",
    "persona_cells",
]

NO_PERSONA = "none"
PERSONA_FIELDS = ("id", "label", "axes", "text", "origin")


@dataclass(frozen=True)
class Persona:
    """One respondent description of the bank (``text`` is None only for ``none``)."""

    id: str
    label: str
    text: str | None
    axes: dict[str, Any] | None = None
    origin: str = ""


@dataclass(frozen=True)
class Component:
    """A (persona, temperature) component of the base estimand with its weight in each order."""

    persona: str
    temperature: float
    weight: float
    weight_ba: float

    @property
    def id(self) -> str:
        return f"{self.persona}/T{self.temperature:g}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **asdict(self)}


def load_personas(path: str | Path) -> dict[str, Persona]:
    """The persona bank (JSON Lines, fields :data:`PERSONA_FIELDS`); InputError naming the file,
    line and field of the first problem."""
    path = Path(path)
    if not path.exists() and Path("data.dvc").exists() and not Path("data").exists():
        raise InputError(
            f"{path}: the study inputs are not checked out; run `make data` (dvc pull data.dvc) first"
        )
    out: dict[str, Persona] = {}
    for lineno, row in iter_jsonl(path):
        where = f"{path}: line {lineno}"
        check_fields(row, where, optional=PERSONA_FIELDS)
        pid, text, axes = row.get("id"), row.get("text"), row.get("axes")
        if not isinstance(pid, str) or not ID_PATTERN.match(pid):
            raise InputError(
                f"{where}: field 'id' = {pid!r} must be a lowercase id (a-z, 0-9, '.', '_', '-')"
            )
        if pid in out:
            raise InputError(f"{where}: field 'id' = {pid!r} is given twice")
        if pid == NO_PERSONA:
            if text is not None:
                raise InputError(
                    f"{where}: persona 'none' is the unconditioned component: field 'text' must be null"
                )
        elif not isinstance(text, str) or not text.strip():
            raise InputError(f"{where}: persona {pid!r}: field 'text' must be a non-empty string")
        if axes is not None and not isinstance(axes, dict):
            raise InputError(f"{where}: persona {pid!r}: field 'axes' must be an object or null")
        label = row.get("label")
        if not isinstance(label, str) or not label.strip():
            raise InputError(f"{where}: persona {pid!r}: field 'label' must be a non-empty string")
        out[pid] = Persona(pid, label, text, axes, str(row.get("origin") or ""))
    if NO_PERSONA not in out:
        raise InputError(f"{path}: the bank needs the unconditioned persona 'none' (text null)")
    return out


def components_of(mix: MixtureConfig) -> list[Component]:
    """The components in order (the grid persona-major, or the explicit list); InputError naming
    the field when weights are negative, do not sum to 1 or a component is listed twice."""
    where = "study.estimand.mixture"
    if mix.components:
        comps = [
            Component(
                c.persona,
                float(c.temperature),
                float(c.weight),
                float(c.weight if c.weight_ba is None else c.weight_ba),
            )
            for c in mix.components
        ]
    else:
        n_p, n_t = len(mix.personas), len(mix.temperatures)
        wp = mix.persona_weights if mix.persona_weights is not None else [1.0 / n_p] * n_p
        wt = mix.temperature_weights if mix.temperature_weights is not None else [1.0 / n_t] * n_t
        if len(wp) != n_p or len(wt) != n_t:
            raise InputError(
                f"{where}: persona_weights / temperature_weights need one weight per persona / temperature"
            )
        comps = [
            Component(p, float(t), float(a) * float(b), float(a) * float(b))
            for p, a in zip(mix.personas, wp, strict=True)
            for t, b in zip(mix.temperatures, wt, strict=True)
        ]
    seen: set[str] = set()
    for c in comps:
        if c.id in seen:
            raise InputError(f"{where}.components: component {c.id!r} is listed twice")
        if not c.temperature > 0:
            raise InputError(f"{where}: component {c.id!r}: field 'temperature' must be > 0")
        seen.add(c.id)
    try:
        check_weights([c.weight for c in comps], [c.weight_ba for c in comps], float(mix.weight_tol))
    except ValueError as e:
        raise InputError(f"{where}: {e}") from None
    return comps


def check_personas(mix: MixtureConfig, bank: dict[str, Persona]) -> None:
    """InputError naming the field for a persona id the bank does not have."""
    listed = [c.persona for c in mix.components] if mix.components else list(mix.personas)
    field_name = "components[*].persona" if mix.components else "personas"
    unknown = [p for p in listed if p not in bank]
    if unknown:
        raise InputError(
            f"study.estimand.mixture.{field_name}: unknown persona id(s) {unknown} in {mix.personas_path} "
            f"(known: {', '.join(bank)})"
        )


def persona_system(persona: Persona, template: str) -> str:
    """The persona's sentence of the system prompt (``{description}``: its text)."""
    return template.replace("{description}", str(persona.text))


def persona_cells(
    items: list[Item], framing: FramingConfig, mcfg: MappingConfig, mix: MixtureConfig, comps: list[Component]
) -> list[Cell]:
    """The cells of every persona of the components but ``none`` (whose cells are the plain ones),
    persona after persona in order of first appearance."""
    bank = load_personas(mix.personas_path)
    check_personas(mix, bank)
    out: list[Cell] = []
    for pid in dict.fromkeys(c.persona for c in comps):
        if pid != NO_PERSONA:
            out += build_cells(items, framing, mcfg, (pid, persona_system(bank[pid], mix.persona_template)))
    return out


def mixture_plan(mix: MixtureConfig, comps: list[Component], cells: list[Cell]) -> dict[str, Any]:
    """The plan's ``mixture`` section: the components and every persona prompt."""
    return {
        "base": mix.base,
        "components": [c.to_json() for c in comps],
        "cells": [
            {
                "persona": c.persona,
                "item": c.item.id,
                "mapping": c.mapping,
                "order": c.order,
                "prompts": [list(r.messages) for r in c.requests],
            }
            for c in cells
        ],
    }


def measure_mixture(
    plain: list[Cell], extra: list[Cell], cached: CachedBackend, est: EstimandConfig, top_k: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(estimand rows, plain log-prob rows)``. Log-prob base: every cell in one call (the hf
    backend's prefix trie shares what prompts share), temperatures read in analysis. Sampled
    base: the plain estimand as ``estimand=sampled`` samples it, then each other (persona,
    temperature) with its own seeds; the plain cells' log-probs for gate G3."""
    assert est.mixture is not None
    comps = components_of(est.mixture)
    if est.mixture.base == "logprob":
        rows = measure_logprob(plain + extra, cached, top_k)
        return rows, rows[: 3 * len(plain)]
    rows = measure_sampled(plain, cached, est)
    by_persona: dict[str, list[Cell]] = {NO_PERSONA: plain}
    for cell in extra:
        by_persona.setdefault(str(cell.persona), []).append(cell)
    for c in comps:
        if c.persona == NO_PERSONA and c.temperature == est.temperature:
            continue  # the plain estimand's own rows
        at = dataclasses.replace(est, temperature=c.temperature)
        tag = {"persona": c.persona, "temperature": c.temperature}
        rows += measure_sampled(by_persona[c.persona], cached, at, f"estimand|{c.id}", tag)
    lp = measure_logprob(plain, cached, top_k) if hasattr(cached.backend, "label_logprobs") else []
    return rows + lp, lp
