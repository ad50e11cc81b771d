"""One schema per config group, registered in Hydra's ConfigStore.

YAML files under ``conf/`` only override these dataclasses (each starts with
``defaults: [<schema>, _self_]``), so every default lives here and only here, and a
typo'd or mistyped key fails at composition time, before any model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# --- model -------------------------------------------------------------------------------


@dataclass
class ModelConfig:
    backend: str = MISSING  # "hf" | "openai" | "sim"
    name: str = MISSING  # display name used in run names and MLflow


@dataclass
class HFModelConfig(ModelConfig):
    backend: str = "hf"
    model: str = MISSING  # "embedded:gemma3-270m" or a hub id / local path
    revision: str | None = None
    dtype: str = "float32"
    chat_template: str | None = None  # overrides the tokenizer's template
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 16
    base_model: bool = False  # a base checkpoint (no instruction tuning)


@dataclass
class OpenAIModelConfig(ModelConfig):
    backend: str = "openai"
    base_url: str = MISSING
    model: str = MISSING
    endpoint: str = "chat"  # "chat" | "completions"
    chat_template: str | None = None  # required for endpoint=completions
    api_key_env: str = "OPENAI_API_KEY"
    revision: str | None = None
    top_logprobs: int = 20
    label_space_variants: bool = False  # also count " A" for label "A" (recorded per result)
    bos_token: str = ""  # completions mode: servers add their own BOS
    tokenizer: str = "auto"  # G1 tokenize endpoint: auto | llama_cpp_python | llama_cpp | vllm | none
    server_root: str | None = None  # default: base_url without a trailing /v1
    timeout_s: float = 60.0
    max_retries: int = 5
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 30.0
    request_deadline_s: float = 600.0  # total time for one request, retries and waits included
    max_concurrency: int = 1
    batch_size: int = 8
    base_model: bool = False


@dataclass
class SimModelConfig(ModelConfig):
    backend: str = "sim"
    agent: str = (
        MISSING  # projective | repetition | mixture_repetition | luders_symmetric | luders_asymmetric
    )
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 256
    base_model: bool = False


# --- study-level groups --------------------------------------------------------------------


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
    epsilon: float = 0.02
    float_tol: float = 1e-9
    gamma_tol: float = 0.0
    saturation_threshold: float = 0.99
    saturation_sensitivity: list[float] = field(default_factory=lambda: [0.95, 0.975, 0.99])
    memorization_threshold: float = 0.3
    memorization_min_pairs: int = 2
    top_k: int = 10
    gates: GatesConfig = field(default_factory=GatesConfig)


@dataclass
class PreregConfig:
    """A registration: its name and declarative predictions (see lmaudit.provenance.prereg).

    A prereg config may also select the study's other groups (``defaults: - override /framing: ...``)
    so that ``prereg=<name>`` alone names the whole registered design."""

    name: str = MISSING
    description: str = ""
    predictions: list[Any] = field(default_factory=list)
    # bound: the plan's data inputs are part of the registration (the default). open: the
    # registration precedes its data (predictions about a file still to be imported); it binds
    # everything but the study's data keys, and the data scored are digested with the scores.
    data: str = "bound"


@dataclass
class PathsConfig:
    results: str = "results"
    cache: str = "cache"
    mlruns: str = "mlruns"
    prereg: str = "prereg"


@dataclass
class MLflowConfig:
    enabled: bool = True
    experiment: str | None = None  # default: "lmaudit-<study>"


@dataclass
class RootConfig:
    study: Any = MISSING
    model: Any = MISSING
    estimand: EstimandConfig = MISSING
    framing: FramingConfig = MISSING
    mapping: MappingConfig = MISSING
    items: ItemsConfig = MISSING
    judge: Any = None  # the judge study's groups (judge/condition, judge/rubric, judge/wrapper)
    prereg: Any = None  # a PreregConfig when prereg=<name> is selected
    stage: str = "all"  # plan | freeze | measure | analyze | report | all
    out_dir: str | None = None  # default: <paths.results>/<study>/<run_name>
    run_name: str | None = None  # default: <model>-<framing>-<mapping>-<estimand>
    measurements: str | None = None  # analyze: a measurement file to (re-)analyse
    progress: bool = True
    paths: PathsConfig = field(default_factory=PathsConfig)
    mlflow: MLflowConfig = field(default_factory=MLflowConfig)


# --- draws study (seed 004) ------------------------------------------------------------------


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


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=RootConfig)
    cs.store(group="model", name="_hf", node=HFModelConfig)
    cs.store(group="model", name="_openai", node=OpenAIModelConfig)
    cs.store(group="model", name="_sim", node=SimModelConfig)
    cs.store(group="study", name="_qq", node=QQStudyConfig)
    cs.store(group="estimand", name="_estimand", node=EstimandConfig)
    cs.store(group="framing", name="_framing", node=FramingConfig)
    cs.store(group="mapping", name="_mapping", node=MappingConfig)
    cs.store(group="items", name="_items", node=ItemsConfig)
    cs.store(group="study", name="_draws", node=DrawsStudyConfig)
    register_judge_configs(cs)


# --- judge study (seed 001) -------------------------------------------------------------------


@dataclass
class JudgeConditionSpec:
    id: str = MISSING  # P0, PA, PB, PAB, SWAP ...
    wrap: list[str] = field(default_factory=list)  # displayed sides that get the wrapper: A and/or B
    swap: bool = False  # responses A and B exchanged (the parent study's position design)
    description: str = ""


@dataclass
class JudgeConditionSetConfig:
    name: str = MISSING  # the set's name (run names); one job judges every condition of the set
    reference: str = "P0"  # the condition every other one is compared with
    conditions: list[JudgeConditionSpec] = field(default_factory=list)


@dataclass
class JudgeWrapperConfig:
    name: str = MISSING
    prefix: str = MISSING  # added before the unchanged response string
    suffix: str = MISSING  # added after it


@dataclass
class JudgeRubricConfig:
    name: str = MISSING
    text: str = MISSING  # the frozen pairwise rubric
    # the judge prompt; placeholders {rubric} {prompt} {response_a} {response_b}, filled in one pass
    template: str = MISSING
    system: str | None = None  # an optional system turn (None: the rubric lives in the user turn)
    readout_turn: str = MISSING  # log-prob readout: one extra user turn after the judge prompt


@dataclass
class JudgeRetryConfig:
    max_attempts: int = 2  # attempts per judgment, the first included (1: no retry)


@dataclass
class JudgeStudyConfig:
    name: str = "judge"
    candidates_path: str = "data/judge/demo/candidates.jsonl"
    mapping_path: str | None = "data/judge/demo/mapping.json"  # hidden from the judge; read to unblind
    prompt_ids: list[str] | None = None  # None: every prompt of the candidate set
    k: int = 1  # independent judgments per prompt and condition
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 64
    seed: int = 20261007  # every judgment's seed derives from it (recorded per judgment)
    isolation: str = "fresh"  # fresh | shared (shared reproduces a deviation and is recorded as one)
    retry: JudgeRetryConfig = field(default_factory=JudgeRetryConfig)
    readout: bool = True  # P(A), P(B), P(TIE) where the backend has the log-prob contract
    readout_labels: dict[str, str] = field(default_factory=lambda: {"A": "A", "B": "B", "TIE": "TIE"})
    top_k: int = 10
    alpha: float = 0.05  # exact intervals and tests
    import_dir: str | None = None  # analyse recorded results (results_<condition>.json) instead of judging


def register_judge_configs(cs: ConfigStore) -> None:
    cs.store(group="study", name="_judge", node=JudgeStudyConfig)
    cs.store(group="judge/condition", name="_condition", node=JudgeConditionSetConfig)
    cs.store(group="judge/wrapper", name="_wrapper", node=JudgeWrapperConfig)
    cs.store(group="judge/rubric", name="_rubric", node=JudgeRubricConfig)
