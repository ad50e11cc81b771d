"""The SLURM launcher's resources follow the model's execution fields (docs/scale.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parents[1] / "conf"

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")


def _launcher(*overrides: str) -> dict[str, object]:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="config", overrides=["hydra/launcher=slurm", *overrides], return_hydra_config=True
        )
    out = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert isinstance(out, dict)
    return {k: out[k] for k in ("nodes", "tasks_per_node", "gpus_per_node")}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ([], {"nodes": 1, "tasks_per_node": 1, "gpus_per_node": 0}),
        (["model=sim_projective"], {"nodes": 1, "tasks_per_node": 1, "gpus_per_node": 0}),
        (
            ["model=qwen3_4b", "model.runner=lightning", "model.devices=4", "model.num_nodes=2"],
            {"nodes": 2, "tasks_per_node": 4, "gpus_per_node": 4},
        ),
        (
            ["model.runner=lightning", "model.devices=2", "model.accelerator=cpu"],
            {"nodes": 1, "tasks_per_node": 2, "gpus_per_node": 0},
        ),
    ],
)
def test_slurm_resources_follow_the_model(overrides: list[str], expected: dict[str, int]) -> None:
    assert _launcher(*overrides) == expected
