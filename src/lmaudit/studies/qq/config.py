"""The QQ study's config schema: ``cfg.study`` and its groups ``conf/study/qq/{estimand,framing,mapping,items}``.

YAML files only override these dataclasses; every default lives here."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING


@dataclass
class EstimandConfig:
    kind: str = MISSING  # "logprob" | "sampled"
    n: int = 200  # sampled: draws per position (forced branch)
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0


@dataclass
class FewShotExample:
    question: str = MISSING
    options: list[str] = field(default_factory=list)  # semantic options; [] for Yes/No
    answer: int = 0  # index of the semantic option answered


@dataclass
class FramingConfig:
    name: str = MISSING
    track: str = MISSING  # "M" | "P"
    # system prompt for A/B-labelled items; {reference_year} is substituted where present
    system_ab: str = MISSING
    system_yesno: str | None = None  # system prompt for Yes/No items (None: item skipped)
    historical_headers: bool = True  # Track M shows an item's header once; Track P replaces it
    track_p_only: bool = False  # restrict to items flagged for Track P (year-fixed)
    few_shot: list[FewShotExample] = field(default_factory=list)  # answer-format exemplar turns


@dataclass
class MappingConfig:
    name: str = MISSING
    mappings: list[str] = field(default_factory=lambda: ["map1", "map2"])  # subset of map1, map2
    labels: list[str] = field(default_factory=lambda: ["A", "B"])
    yesno_labels: list[str] = field(default_factory=lambda: ["Yes", "No"])


@dataclass
class ItemsConfig:
    name: str = MISSING
    path: str = MISSING
    ids: list[str] | None = None  # None: every item of the bank
    matched_pairs: bool = True  # memorization alert over S2 items' matched_to


@dataclass
class G3Config:
    enabled: bool = True
    items: list[str] = field(default_factory=lambda: ["s1-01", "s3-01"])
    n: int = 200  # accepted joint samples per item-order
    retry_n: int = 400  # one retry at this size
    alpha: float = 0.01  # per item-order, Bonferroni over the four joint cells
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 20260701
    max_attempts_factor: int = 20  # give up after n * factor draws at one position


@dataclass
class GatesConfig:
    g2_max_other: float = 0.01
    g3: G3Config = field(default_factory=G3Config)


@dataclass
class QQStudyConfig:
    name: str = "qq"
    # the study's groups (conf/study/qq/<group>/), chosen with <group>=<option>
    estimand: EstimandConfig = MISSING
    framing: FramingConfig = MISSING
    mapping: MappingConfig = MISSING
    items: ItemsConfig = MISSING
    epsilon: float = 0.02
    float_tol: float = 1e-9
    gamma_tol: float = 0.0
    saturation_threshold: float = 0.99
    saturation_sensitivity: list[float] = field(default_factory=lambda: [0.95, 0.975, 0.99])
    memorization_threshold: float = 0.3
    memorization_min_pairs: int = 2
    top_k: int = 10
    gates: GatesConfig = field(default_factory=GatesConfig)
