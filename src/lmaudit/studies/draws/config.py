"""The draws study's config schema (``cfg.study``); YAML files only override it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from lmaudit.config.ranges import ranged


@dataclass
class DrawsConditionConfig:
    name: str = MISSING
    system: str | None = None  # replaces the probe's system prompt
    temperature: float | None = ranged(None, ge=0)  # replaces the study's temperature


@dataclass
class DrawsExemplarConfig:
    prompt: str = MISSING  # an answer-format turn pair shown before each probe (base models)
    answer: str = MISSING


@dataclass
class DrawsNormaliseConfig:
    kind: str = ranged("first_word", choices=("first_word", "regex", "labels"))
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
    replicates: int = ranged(1, ge=1)  # independent sequences per probe and condition (own seeds)
    n: int = ranged(20, ge=2)  # draws per sequence
    temperature: float = ranged(0.7, ge=0)
    top_p: float = ranged(1.0, gt=0, le=1)
    max_tokens: int = ranged(1, ge=1)
    seed: int = 20261030  # request seeds derive from it
    source: str = "lmaudit"  # the source name of sampled sequences
    normalise: DrawsNormaliseConfig = field(default_factory=DrawsNormaliseConfig)
    # import: analyse sequences drawn elsewhere (JSONL, docs/draws.md) instead of sampling
    import_path: str | None = None
    # what import_path holds: recognised from its content (auto), or forced; a file of another
    # format is refused. inspect_ai logs and lm-eval samples need the interop extra (docs/interop.md)
    import_format: str = ranged("auto", choices=("auto", "inspect", "lm_eval", "lmaudit"))
    exclude_patterns: list[str] = field(default_factory=lambda: ["pred-*", "claim-*"])
    # the registered analysis
    permutations: int = ranged(10_000, ge=1)  # B joint permutations
    rho_min: float = ranged(0.0, ge=0, le=1)
    rho_max: float = ranged(0.5, ge=0, le=1)
    rho_step: float = ranged(0.01, gt=0, le=1)
    sims_per_step: int = ranged(500, ge=1)
    power_rhos: list[float] = ranged(factory=lambda: [0.05, 0.1, 0.3], each={"ge": 0, "le": 1})
    alpha: float = ranged(
        0.05, gt=0, lt=1
    )  # Holm level; the bound's 5% share; power against the 1 - alpha null quantile
    grouped_flag_p: float = ranged(0.001, gt=0, lt=1)
    analysis_seed: int = 20261030

    @staticmethod
    def check_relations(node: Any) -> list[str]:
        """Ranges that tie two fields together."""
        if float(node.rho_min) >= float(node.rho_max):
            return [f"need rho_min < rho_max, got rho_min = {node.rho_min}, rho_max = {node.rho_max}"]
        return []
