"""The draws study's config schema (``cfg.study``); YAML files only override it."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING


@dataclass
class DrawsConditionConfig:
    name: str = MISSING
    system: str | None = None  # replaces the probe's system prompt
    temperature: float | None = None  # replaces the study's temperature


@dataclass
class DrawsExemplarConfig:
    prompt: str = MISSING  # an answer-format turn pair shown before each probe (base models)
    answer: str = MISSING


@dataclass
class DrawsNormaliseConfig:
    kind: str = "first_word"  # first_word | regex | labels
    pattern: str | None = None  # regex: the answer is the first group (or the whole match)
    labels: list[str] = field(default_factory=list)  # labels: the first label found in the text
    case_sensitive: bool = False


@dataclass
class DrawsStudyConfig:
    name: str = "draws"
    # sampling (import_path = null): probes x conditions x replicates sequences of n draws
    probes_path: str = "data/draws/probes.jsonl"
    probe_ids: list[str] | None = None  # None: every probe of the file
    exemplars: list[DrawsExemplarConfig] = field(default_factory=list)
    conditions: list[DrawsConditionConfig] = field(
        default_factory=lambda: [DrawsConditionConfig(name="default")]
    )
    replicates: int = 1  # independent sequences per probe and condition (own seeds)
    n: int = 20  # draws per sequence
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 1
    seed: int = 20261030  # request seeds derive from it
    source: str = "lmaudit"  # the source name of sampled sequences
    normalise: DrawsNormaliseConfig = field(default_factory=DrawsNormaliseConfig)
    # import: analyse sequences drawn elsewhere (JSONL, docs/draws.md) instead of sampling
    import_path: str | None = None
    exclude_patterns: list[str] = field(default_factory=lambda: ["pred-*", "claim-*"])
    # the registered analysis
    permutations: int = 10_000  # B joint permutations
    rho_min: float = 0.0
    rho_max: float = 0.5
    rho_step: float = 0.01
    sims_per_step: int = 500
    power_rhos: list[float] = field(default_factory=lambda: [0.05, 0.1, 0.3])
    alpha: float = 0.05  # Holm level; the bound's 5% share; power against the 1 - alpha null quantile
    grouped_flag_p: float = 0.001
    analysis_seed: int = 20261030
