from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from lmaudit.config.overrides import canonical
from lmaudit.config.schema import register_configs

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"

register_configs()


@pytest.fixture
def make_cfg(tmp_path: Path) -> Iterator[Callable[..., DictConfig]]:
    """Compose the real config (conf/) with overrides (short spellings as run.py takes them);
    outputs go under tmp_path."""

    def _make(*overrides: str, name: str = "run") -> DictConfig:
        args, study = canonical(list(overrides))
        base = [
            f"paths.results={tmp_path / 'results'}",
            f"paths.cache={tmp_path / 'cache'}",
            f"paths.mlruns={tmp_path / 'mlruns'}",
            f"out_dir={tmp_path / name}",
            "progress=false",
        ]
        reg = next((a.split("=", 1)[1] for a in args if a.startswith("prereg=")), None)
        if reg is not None:  # a registration may select its study in its defaults list
            text = (CONF / "prereg" / f"{reg}.yaml").read_text()
            study = next(
                (ln.split(":")[1].strip() for ln in text.splitlines() if "override /study:" in ln), study
            )
        if study == "qq":
            base.append(f"study.items.path={REPO / 'data/qq/items/pilot.json'}")
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return compose(config_name="config", overrides=[*base, *args])

    yield _make
