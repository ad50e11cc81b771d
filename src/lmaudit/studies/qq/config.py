"""The QQ study's config schema: ``cfg.study`` and its groups ``conf/study/qq/{estimand,framing,mapping,items}``.

YAML files only override these dataclasses; every default lives here."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from lmaudit.config.ranges import ranged


@dataclass
class EstimandConfig:
    kind: str = ranged(MISSING, choices=("logprob", "sampled"))
    n: int = ranged(200, ge=1)  # sampled: draws per position (forced branch)
    temperature: float = ranged(1.0, ge=0)
    top_p: float = ranged(1.0, gt=0, le=1)
    seed: int = 0


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
