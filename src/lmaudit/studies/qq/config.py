"""The QQ study's config schema: ``cfg.study`` and its groups ``conf/study/qq/{estimand,framing,mapping,items}``.

YAML files only override these dataclasses; every default lives here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, OmegaConf

from lmaudit.config.ranges import ranged


def _value(node: Any, key: str) -> Any:
    """A config node's field, None while it is missing (``???``)."""
    return None if OmegaConf.is_missing(node, key) else node.get(key)


@dataclass
class MixtureComponentConfig:
    """One component of an explicit mixture: a persona at a temperature, with its weight."""

    persona: str = ranged("none", nonempty=True)  # an id of the persona bank ("none": no persona)
    temperature: float = ranged(1.0, gt=0)
    weight: float = ranged(MISSING, ge=0, le=1)
    # order-dependent selection (Prop. 7's violation channel; sim checks only): the BA order's
    # weight; None: the AB weight (order-matched)
    weight_ba: float | None = ranged(None, ge=0, le=1)


@dataclass
class MixtureConfig:
    """``estimand=mixture``: a population of (persona, temperature, base estimand) components.

    By default the components are the grid ``personas x temperatures`` with weight
    ``persona_weights[i] * temperature_weights[j]`` (equal when None), identical in both
    orders; a non-empty ``components`` list replaces the grid."""

    base: str = ranged("logprob", choices=("logprob", "sampled"))
    personas_path: str = ranged("data/qq/personas.jsonl", nonempty=True)
    personas: list[str] = ranged(factory=lambda: ["none"], min_len=1, distinct=True, each={"nonempty": True})
    temperatures: list[float] = ranged(factory=lambda: [1.0], min_len=1, distinct=True, each={"gt": 0})
    persona_weights: list[float] | None = ranged(None, each={"ge": 0, "le": 1})  # None: equal
    temperature_weights: list[float] | None = ranged(None, each={"ge": 0, "le": 1})  # None: equal
    components: list[MixtureComponentConfig] = field(default_factory=list)
    # how a persona enters the system prompt, after the framing's own ({description}: its text)
    persona_template: str = ranged("Answer as this respondent would: {description}", nonempty=True)
    weight_tol: float = ranged(1e-9, gt=0, lt=0.01)  # weights must sum to 1 within this

    @staticmethod
    def check_relations(node: Any) -> list[str]:
        """Weights: one per grid entry, summing to 1 (per order) within ``weight_tol``."""
        tol = float(node.get("weight_tol", 1e-9))
        out: list[str] = []

        def total(name: str, ws: list[Any]) -> None:
            if ws and all(isinstance(w, int | float) for w in ws) and abs(sum(ws) - 1.0) > tol:
                out.append(f"{name} sum to {sum(ws)!r}, not 1 (within weight_tol = {tol:g})")

        comps = list(node.get("components") or [])
        out += [
            f"components[{i}].weight is required" for i, c in enumerate(comps) if _value(c, "weight") is None
        ]
        if comps:
            total("components[*].weight", [_value(c, "weight") for c in comps])
            ba = [_value(c, "weight_ba") for c in comps]
            if any(w is not None for w in ba):
                if any(w is None for w in ba):
                    out.append("components[*].weight_ba must be set for every component or for none")
                else:
                    total("components[*].weight_ba", ba)
            return out
        for axis, values in (("persona", "personas"), ("temperature", "temperatures")):
            ws = node.get(f"{axis}_weights")
            if ws is None:
                continue
            if len(ws) != len(node.get(values) or []):
                out.append(
                    f"{axis}_weights has {len(ws)} entries, {values} has {len(node.get(values) or [])}"
                )
            else:
                total(f"{axis}_weights", list(ws))
        return out


@dataclass
class EstimandConfig:
    kind: str = ranged(MISSING, choices=("logprob", "sampled", "mixture"))
    n: int = ranged(200, ge=1)  # sampled: draws per position (forced branch)
    temperature: float = ranged(1.0, ge=0)
    top_p: float = ranged(1.0, gt=0, le=1)
    seed: int = 0
    # sampled (and a mixture over the sampled base): family-wise level per item of the region
    # on the positions' probabilities that every decision is taken over (docs/qq.md)
    alpha: float = ranged(0.05, gt=0, lt=1)
    mixture: MixtureConfig | None = None  # kind=mixture only: its components

    @staticmethod
    def check_relations(node: Any) -> list[str]:
        """``mixture`` is set exactly when ``kind`` is mixture."""
        has = node.get("mixture") is not None
        if node.get("kind") == "mixture" and not has:
            return ["kind = 'mixture' needs the field 'mixture' (its components)"]
        if has and node.get("kind") != "mixture":
            return [f"field 'mixture' is set but kind = {node.get('kind')!r} is not 'mixture'"]
        return []


@dataclass
class FewShotExample:
    question: str = MISSING
    options: list[str] = field(default_factory=list)  # semantic options; [] for Yes/No
    answer: int = ranged(0, ge=0)  # index of the semantic option answered


@dataclass
class FramingConfig:
    name: str = MISSING
    track: str = ranged(MISSING, choices=("M", "P"))
    # system prompt for A/B-labelled items; {reference_year} is substituted where present
    system_ab: str = MISSING
    system_yesno: str | None = None  # system prompt for Yes/No items (None: item skipped)
    historical_headers: bool = True  # Track M shows an item's header once; Track P replaces it
    track_p_only: bool = False  # restrict to items flagged for Track P (year-fixed)
    few_shot: list[FewShotExample] = field(default_factory=list)  # answer-format exemplar turns


@dataclass
class MappingConfig:
    name: str = MISSING
    mappings: list[str] = ranged(
        factory=lambda: ["map1", "map2"], min_len=1, distinct=True, subset=("map1", "map2")
    )
    labels: list[str] = ranged(factory=lambda: ["A", "B"], length=2, distinct=True, each={"nonempty": True})
    yesno_labels: list[str] = ranged(
        factory=lambda: ["Yes", "No"], length=2, distinct=True, each={"nonempty": True}
    )


@dataclass
class ItemsConfig:
    name: str = MISSING
    path: str = ranged(MISSING, nonempty=True)
    ids: list[str] | None = ranged(None, min_len=1, distinct=True)  # None: every item of the bank
    matched_pairs: bool = True  # memorization alert over S2 items' matched_to


@dataclass
class G3Config:
    enabled: bool = True
    items: list[str] = field(default_factory=lambda: ["s1-01", "s3-01"])
    n: int = ranged(200, ge=1)  # accepted joint samples per item-order
    retry_n: int = ranged(400, ge=1)  # one retry at this size
    alpha: float = ranged(0.01, gt=0, lt=1)  # per item-order, Bonferroni over the four joint cells
    temperature: float = ranged(1.0, ge=0)
    top_p: float = ranged(1.0, gt=0, le=1)
    seed: int = 20260701
    max_attempts_factor: int = ranged(20, ge=1)  # give up after n * factor draws at one position


@dataclass
class GatesConfig:
    g2_max_other: float = ranged(0.01, ge=0, le=1)
    g3: G3Config = field(default_factory=G3Config)


@dataclass
class QQStudyConfig:
    name: str = "qq"
    # the study's groups (conf/study/qq/<group>/), chosen with <group>=<option>
    estimand: EstimandConfig = MISSING
    framing: FramingConfig = MISSING
    mapping: MappingConfig = MISSING
    items: ItemsConfig = MISSING
    epsilon: float = ranged(0.02, ge=0)
    float_tol: float = ranged(1e-9, ge=0)
    gamma_tol: float = ranged(0.0, ge=0)
    saturation_threshold: float = ranged(0.99, gt=0.5, le=1)
    saturation_sensitivity: list[float] = ranged(
        factory=lambda: [0.95, 0.975, 0.99], each={"gt": 0.5, "le": 1}
    )
    memorization_threshold: float = ranged(0.3, ge=0)
    memorization_min_pairs: int = ranged(2, ge=1)
    top_k: int = ranged(10, ge=1)
    gates: GatesConfig = field(default_factory=GatesConfig)


#: the study's own config groups (``conf/study/qq/<group>/``) and their schemas
GROUPS: Mapping[str, type] = {
    "estimand": EstimandConfig,
    "framing": FramingConfig,
    "mapping": MappingConfig,
    "items": ItemsConfig,
}
