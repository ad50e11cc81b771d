"""The shared config schemas (root, model, prereg, paths, mlflow), and their registration
with every study's own schema in Hydra's ConfigStore.

YAML files under ``conf/`` only override these dataclasses (each starts with
``defaults: [<schema>, _self_]``), so every default lives here and only here, and a
typo'd or mistyped key fails at composition time, before any model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from lmaudit.config.execution import PRECISIONS, execution_problems
from lmaudit.config.ranges import ranged

# --- model -------------------------------------------------------------------------------


@dataclass
class ModelConfig:
    backend: str = MISSING  # "hf" | "openai" | "sim"
    name: str = ranged(MISSING, nonempty=True)  # display name used in run names and MLflow


@dataclass
class HFModelConfig(ModelConfig):
    backend: str = "hf"
    model: str = MISSING  # "embedded:gemma3-270m" or a hub id / local path
    revision: str | None = None
    dtype: str = ranged("float32", choices=("float32", "bfloat16", "float16"))
    chat_template: str | None = None  # overrides the tokenizer's template
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    batch_size: int = ranged(16, ge=1)
    base_model: bool = False  # a base checkpoint (no instruction tuning)
    # How the model runs (docs/scale.md); never part of the backend identity, a cache key or the plan.
    runner: str = ranged("inprocess", choices=("inprocess", "lightning"))
    devices: int = ranged(
        1, ge=1
    )  # processes per node (one per GPU; on CPU, each gets cores / devices threads)
    num_nodes: int = ranged(1, ge=1)
    strategy: str = ranged("ddp", choices=("ddp", "fsdp"))  # fsdp: a model too big for one device
    accelerator: str = ranged("auto", choices=("auto", "cpu", "gpu"))
    # default: the model's dtype ("32-true" for float32 ...); a "-mixed" precision computes under
    # autocast, which changes the arithmetic and so enters the identity
    precision: str | None = ranged(None, choices=PRECISIONS)

    @staticmethod
    def check_relations(node: Any) -> list[str]:
        return execution_problems(node)


@dataclass
class OpenAIModelConfig(ModelConfig):
    backend: str = "openai"
    base_url: str = MISSING
    model: str = MISSING
    endpoint: str = ranged("chat", choices=("chat", "completions"))
    chat_template: str | None = None  # required for endpoint=completions
    api_key_env: str = "OPENAI_API_KEY"
    revision: str | None = None
    top_logprobs: int = ranged(20, ge=1)
    label_space_variants: bool = False  # also count " A" for label "A" (recorded per result)
    bos_token: str = ""  # completions mode: servers add their own BOS
    # G1 tokenize endpoint
    tokenizer: str = ranged("auto", choices=("auto", "llama-cpp-python", "llama.cpp", "vllm", "none"))
    server_root: str | None = None  # default: base_url without a trailing /v1
    timeout_s: float = ranged(60.0, gt=0)
    max_retries: int = ranged(5, ge=0)
    backoff_base_s: float = ranged(0.5, ge=0)
    backoff_cap_s: float = ranged(30.0, ge=0)
    request_deadline_s: float = ranged(600.0, gt=0)  # total time for one request, retries and waits included
    # the most bytes of one answer read (8 MiB); a larger one is refused, never cached
    max_answer_bytes: int = ranged(8 << 20, ge=1)
    max_concurrency: int = ranged(1, ge=1)
    batch_size: int = ranged(8, ge=1)
    base_model: bool = False


@dataclass
class SimModelConfig(ModelConfig):
    backend: str = "sim"
    agent: str = (
        MISSING  # projective | repetition | mixture_repetition | luders_symmetric | luders_asymmetric
    )
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    batch_size: int = ranged(256, ge=1)
    base_model: bool = False


@dataclass
class PreregConfig:
    """A registration: its name and declarative predictions (see lmaudit.prereg).

    A prereg config may also select the study's other groups (``defaults: - override /framing: ...``)
    so that ``prereg=<name>`` alone names the whole registered design."""

    name: str = ranged(MISSING, nonempty=True)
    description: str = ""
    predictions: list[Any] = field(default_factory=list)
    # bound: the plan's data inputs are part of the registration (the default). open: the
    # registration precedes its data (predictions about a file still to be imported); it binds
    # everything but the study's data keys, and the data scored are digested with the scores.
    data: str = ranged("bound", choices=("bound", "open"))


@dataclass
class PathsConfig:
    results: str = ranged("results", nonempty=True)
    # ad-hoc runs (git-ignored); DVC runs pass cache/<study>/<run>
    cache: str = ranged(".cache/responses", nonempty=True)
    # after a completed measurement, pack the cache and keep only the keys the run used; for a
    # folder the run owns (DVC runs pass true), never for one shared by runs (docs/architecture.md)
    cache_compact: bool = False
    mlruns: str = ranged("mlruns", nonempty=True)
    prereg: str = ranged("prereg", nonempty=True)
    # the registration files (conf/prereg/<name>.yaml); a frozen registration seals its file
    registrations: str = ranged("conf/prereg", nonempty=True)


@dataclass
class MLflowConfig:
    enabled: bool = True
    experiment: str | None = None  # default: "lmaudit-<study>"


@dataclass
class RootConfig:
    study: Any = MISSING  # the selected study's schema (studies/<name>/config.py)
    model: Any = MISSING
    prereg: PreregConfig | None = None  # a registration when prereg=<name> is selected
    stage: str = ranged("all", choices=("plan", "freeze", "measure", "analyze", "report", "all"))
    out_dir: str | None = None  # default: <paths.results>/<study>/<run_name>
    # default: the study's (qq: <model>-<framing>-<mapping>-<estimand>); one path component
    run_name: str | None = ranged(None, nonempty=True)
    measurements: str | None = None  # analyze: a measurement file to (re-)analyse
    # replace a run directory's plan or results made under another config (nothing is deleted without it)
    overwrite: bool = False
    progress: bool = True
    paths: PathsConfig = field(default_factory=PathsConfig)
    mlflow: MLflowConfig = field(default_factory=MLflowConfig)


MODEL_SCHEMAS: dict[str, type[ModelConfig]] = {
    "hf": HFModelConfig,
    "openai": OpenAIModelConfig,
    "sim": SimModelConfig,
}


def register_configs() -> None:
    """Store every schema in Hydra's ConfigStore: the shared ones, and each known study's
    (``study/_<name>``) with its groups' (``study/<name>/<group>/_<group>``)."""
    from lmaudit.config.execution import register_resolvers
    from lmaudit.config.help import register_help
    from lmaudit.studies.registry import all_studies

    register_resolvers()
    register_help()
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=RootConfig)
    cs.store(group="model", name="_hf", node=HFModelConfig)
    cs.store(group="model", name="_openai", node=OpenAIModelConfig)
    cs.store(group="model", name="_sim", node=SimModelConfig)
    for study in all_studies():
        cs.store(group="study", name=f"_{study.name}", node=study.config)
        if not study.has_yaml:  # a study from another package: selectable by its schema alone
            cs.store(group="study", name=study.name, node=study.config)
        for group, schema in study.groups.items():
            cs.store(group=f"study/{study.name}/{group}", name=f"_{group}", node=schema)
