"""The lazy registry: every name resolves, a name's modules are imported only when it is asked
for (a sim backend and a sim embedder import no torch, nor any other backend), and an unknown
name is refused with the known ones listed."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from lmaudit.backends import registry
from lmaudit.backends.base import identity_digest
from lmaudit.backends.registry import build_backend, build_embedder
from lmaudit.backends.sim import build_sim_agent
from lmaudit.errors import BackendError

REPO = Path(__file__).resolve().parents[2]
TABLES = {
    "backend": registry.BACKENDS,
    "embedder": registry.EMBEDDERS,
    **{f"{runner} embedder": kinds for runner, kinds in registry.EMBEDDER_RUNNERS.items()},
}


@pytest.mark.parametrize(
    "target", sorted({t for table in TABLES.values() for t in table.values()}), ids=lambda t: t
)
def test_every_registered_name_resolves_to_a_callable(target: str) -> None:
    assert callable(EntryPoint(name="x", value=target, group="lmaudit.backends").load())


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
    want = build_sim_agent({"agent": "mixture_repetition", "seed": 4, "r_ab_y": 0.3, "other_mass": 0.1})
    assert identity_digest(built.identity) == identity_digest(want.identity)
    assert built.identity["seed"] == 4 and built.other_mass == 0.1


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
            "field 'runner' = 'slurm' is not one of 'inprocess', 'lightning'",
        ),
        (
            build_embedder,
            {"kind": "sim", "runner": "lightning"},
            "field 'runner' = 'lightning' runs only kind=minilm, not 'sim'",
        ),
    ],
)
def test_unknown_names_are_refused_with_the_known_ones(build: Any, cfg: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build(cfg)
