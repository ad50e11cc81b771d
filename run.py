"""lmaudit entry point: ``python run.py [group=option ...] [stage=...]`` (``-m`` for sweeps)."""

from __future__ import annotations

import sys
import traceback

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from lmaudit.config.overrides import with_implied_study
from lmaudit.config.schema import register_configs
from lmaudit.provenance.io import InputError
from lmaudit.tracking.hydra_callback import JobFailed

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | JobFailed | None:
    from lmaudit.cli import run

    sweeping = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        return run(cfg)
    except InputError as e:  # errors for people: no traceback, the message names file/item/field
        print(f"error: {e}", file=sys.stderr)
        if sweeping:  # the sweep goes on; its end reports the failure and exits non-zero
            return JobFailed(str(e))
        sys.exit(2)
    except Exception as e:
        if not sweeping:
            raise
        traceback.print_exc()
        return JobFailed(f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    sys.argv = with_implied_study(sys.argv)  # judge/condition=... selects study=judge
    main()
