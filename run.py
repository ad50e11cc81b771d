"""lmaudit entry point: ``python run.py [group=option ...] [stage=...]`` (``-m`` for sweeps)."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from lmaudit.config.overrides import with_implied_study
from lmaudit.config.schema import register_configs
from lmaudit.provenance.io import InputError

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    from lmaudit.cli import run

    try:
        return run(cfg)
    except InputError as e:  # errors for people: no traceback, the message names file/item/field
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    sys.argv = with_implied_study(sys.argv)  # judge/condition=... selects study=judge
    main()
