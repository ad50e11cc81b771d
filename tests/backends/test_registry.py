"""The registry: every name is declared on its class (``@register_backend`` /
``@register_embedder``) and found through the lazy mapping of where it is declared; a name's
modules are imported only when it is asked for (a sim backend and a sim embedder import no
torch, nor any other backend; the config schemas import no backend at all), and an unknown name
is refused with the known ones listed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import import_module
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from lmaudit.backends import registry
from lmaudit.backends.api import BackendAPI
from lmaudit.backends.base import identity_digest
from lmaudit.backends.registry import (
    BACKEND_MODULES,
    BACKENDS,
    EMBEDDER_MODULES,
    EMBEDDERS,
    build_backend,
    build_embedder,
    register_backend,
    serve_if_secondary,
)
from lmaudit.backends.sim import SIM_AGENTS, SIM_JUDGES, SIM_SAMPLERS, SimAgent, build_sim_agent
from lmaudit.config.model import ModelConfig
from lmaudit.errors import BackendError

REPO = Path(__file__).resolve().parents[2]
DECLARED = [("backend", n, d) for n, d in BACKEND_MODULES.items()] + [
    ("embedder", n, d) for n, d in EMBEDDER_MODULES.items()
]


def _run(code: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize(("what", "name", "declared"), DECLARED, ids=[f"{w}:{n}" for w, n, _ in DECLARED])
def test_every_declared_name_registers_its_class_where_the_mapping_says(
    what: str, name: str, declared: registry.Declared
) -> None:
    """Importing the module the lazy mapping names registers the name, on a BackendAPI class,
    with the schema the mapping names; every runner a class declares resolves to a BackendAPI
    class with a secondary-rank hook."""
    import_module(declared.module)
    entry = (BACKENDS if what == "backend" else EMBEDDERS)[name]
    assert issubclass(entry.cls, BackendAPI)
    if what == "backend":
        assert entry.schema is not None and issubclass(entry.schema, ModelConfig)
        assert declared.schema == f"{entry.schema.__module__}:{entry.schema.__qualname__}"
        assert registry.backend_schema(name) is entry.schema
    for target in entry.runners.values():
        runner = EntryPoint(name="x", value=target, group="lmaudit.backends").load()
        assert issubclass(runner, BackendAPI) and callable(runner.serve_if_secondary)


def test_the_backends_package_and_every_schema_import_no_backend() -> None:
    """``import lmaudit.backends`` (the registry, every config schema and Hydra's ConfigStore
    filled with them) imports no torch, no transformers, no HTTP client and no backend class."""
    code = (
        "import json, sys\n"
        "import lmaudit.backends\n"
        "from lmaudit.backends.registry import backend_names, backend_schema\n"
        "schemas = {n: backend_schema(n).__name__ for n in backend_names()}\n"
        "from lmaudit.config.store import register_configs\n"
        "register_configs()\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'requests', 'lightning',\n"
        "         'lmaudit.backends.hf.backend', 'lmaudit.backends.openai.backend',\n"
        "         'lmaudit.backends.embed.st', 'lmaudit.backends.embed.openai')\n"
        "print(json.dumps([schemas, sorted(m for m in heavy if m in sys.modules)]))\n"
    )
    schemas, loaded = _run(code)
    assert schemas == {"hf": "HFModelConfig", "openai": "OpenAIModelConfig", "sim": "SimModelConfig"}
    assert loaded == []


@pytest.fixture
def scratch_name() -> Iterator[str]:
    yield "scratch-backend"
    BACKENDS.pop("scratch-backend", None)


def test_the_decorator_registers_a_class_and_the_registry_builds_it(scratch_name: str) -> None:
    """One class, one decorator: the registry builds it from a model config (without the keys
    that are not the backend's), and the base class supplies describe, load, close and the
    secondary-rank hook."""

    @register_backend(scratch_name, schema=ModelConfig)
    class Scratch(BackendAPI):
        identity_name = "scratch"
        identity_version = 3

        def __init__(self, *, size: int = 1) -> None:
            self.size = size

        def identity_fields(self) -> dict[str, Any]:
            return {"size": self.size}

    built = build_backend({"backend": scratch_name, "name": "s", "size": 4, "base_model": True})
    assert isinstance(built, Scratch)
    assert built.identity == {"backend": "scratch", "backend_version": 3, "size": 4}
    assert built.describe() == {} and built.load() is None and built.close() is None
    assert built.reads_meta is False and Scratch.serve_if_secondary({}) is False
    assert registry.backend_schema(scratch_name) is ModelConfig and scratch_name in registry.backend_names()
    with pytest.raises(ValueError, match=f"'runner' = 'lightning' does not run '{scratch_name}'"):
        build_backend({"backend": scratch_name, "name": "s", "runner": "lightning"})


def test_the_decorator_refuses_a_second_class_a_foreign_class_and_another_schema(scratch_name: str) -> None:
    @register_backend(scratch_name)
    class First(BackendAPI):
        pass

    class Second(BackendAPI):
        pass

    with pytest.raises(ValueError, match="registered twice"):
        register_backend(scratch_name)(Second)
    with pytest.raises(TypeError, match="does not derive from BackendAPI"):
        register_backend("scratch-other")(object)  # type: ignore[type-var]
    with pytest.raises(
        ValueError, match=re.escape("is not the declared lmaudit.backends.sim.config:SimModelConfig")
    ):
        register_backend("sim", schema=ModelConfig)(Second)
    assert BACKENDS[scratch_name].cls is First


def test_a_secondary_slurm_task_serves_through_the_runner_the_hf_backend_declares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline's one question, ``serve_if_secondary(model)``, reaches the Lightning runner's
    hook: SLURM task 1 serves the pool's jobs (here: records the call) and reports True; task 0
    does not serve."""
    pytest.importorskip("torch")
    from lmaudit.backends.hf.lightning import runner

    served: list[tuple[Path, int, type]] = []
    monkeypatch.setattr(
        runner, "serve", lambda pool, rank, parent, worker: served.append((pool, rank, worker))
    )
    monkeypatch.setenv("LMAUDIT_RUNNER_DIR", str(tmp_path))
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NAME", "lmaudit")
    pool = tmp_path / "slurm-7-0"
    pool.mkdir()
    (pool / "setup.json").write_text("{}")
    model = {"backend": "hf", "name": "m", "model": "x", "runner": "lightning", "devices": 1}
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert serve_if_secondary(model) is False and served == []
    monkeypatch.setenv("SLURM_PROCID", "1")
    assert serve_if_secondary(model) is True and served == [(pool, 1, runner.Worker)]


def test_secondary_ranks_are_asked_only_of_a_runner() -> None:
    """In-process, no process is secondary and nothing is imported; a runner the backend does
    not declare is refused; outside SLURM the Lightning runner's first process is not secondary."""
    assert serve_if_secondary({"backend": "no-such-backend", "runner": "inprocess"}) is False
    with pytest.raises(ValueError, match="'runner' = 'lightning' does not run 'sim'"):
        serve_if_secondary({"backend": "sim", "name": "s", "agent": "projective", "runner": "lightning"})


def test_a_sim_backend_and_a_sim_embedder_import_no_other_backend() -> None:
    code = (
        "import json, sys\n"
        "from lmaudit.backends.registry import build_backend, build_embedder\n"
        "build_backend({'backend': 'sim', 'name': 's', 'agent': 'projective', 'batch_size': 8})\n"
        "build_embedder({'kind': 'sim', 'dim': 8, 'runner': 'inprocess', 'devices': 1})\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'lightning', 'requests',\n"
        "         'lmaudit.backends.hf', 'lmaudit.backends.openai', 'lmaudit.backends.embed.st')\n"
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == []


def test_a_sim_model_config_builds_its_agent() -> None:
    cfg = {
        "backend": "sim",
        "name": "mix",
        "agent": "mixture_repetition",
        "seed": 4,
        "params": {"r_ab_y": 0.3, "other_mass": 0.1},
        "batch_size": 8,
        "base_model": False,
    }
    built = build_backend(cfg)
    assert isinstance(built, SimAgent) and BACKENDS["sim"].cls is SimAgent
    # the agents the sim backend builds by name are the package's tables, no more, no fewer
    assert sorted(SimAgent.agents) == sorted({*SIM_AGENTS, *SIM_SAMPLERS, *SIM_JUDGES})
    want = build_sim_agent({"agent": "mixture_repetition", "seed": 4, "r_ab_y": 0.3, "other_mass": 0.1})
    assert identity_digest(built.identity) == identity_digest(want.identity)
    assert built.identity["seed"] == 4 and built.identity["other_mass"] == 0.1


def test_embedder_configs_pass_their_kind_s_fields() -> None:
    sim = build_embedder({"kind": "sim", "dim": 12, "seed": 5, "model": None, "batch_size": 64})
    assert (sim.dim, sim.seed) == (12, 5)
    remote = build_embedder({"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "e5", "dim": 3})
    assert remote.identity["model"] == "e5" and remote.base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(BackendError, match="openai embeddings config: field 'base_url' is required"):
        build_embedder({"kind": "openai", "model": "e5"})


def test_an_openai_model_config_builds_the_backend_without_a_request() -> None:
    built = build_backend(
        {
            "backend": "openai",
            "name": "o",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
            "base_model": True,
        }
    )
    assert built.identity["backend"] == "openai" and built.identity["model"] == "m"


@pytest.mark.parametrize(
    ("build", "cfg", "match"),
    [
        (build_backend, {"backend": "vllm"}, "field 'backend' = 'vllm' is not one of 'hf', 'openai', 'sim'"),
        (build_backend, {"name": "x"}, "field 'backend' = None is not one of 'hf', 'openai', 'sim'"),
        (build_embedder, {"kind": "bert"}, "field 'kind' = 'bert' is not one of 'minilm', 'openai', 'sim'"),
        (
            build_embedder,
            {"kind": "minilm", "runner": "slurm"},
            "field 'runner' = 'slurm' does not run 'minilm' \\(its runners: 'inprocess', 'lightning'\\)",
        ),
        (
            build_embedder,
            {"kind": "sim", "runner": "lightning"},
            "field 'runner' = 'lightning' does not run 'sim' \\(its runners: 'inprocess'\\)",
        ),
        (
            build_backend,
            {"backend": "openai", "runner": "lightning"},
            "field 'runner' = 'lightning' does not run 'openai'",
        ),
    ],
)
def test_unknown_names_are_refused_with_the_known_ones(build: Any, cfg: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build(cfg)
