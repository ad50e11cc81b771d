"""lmaudit entry point: ``python run.py [group=option ...] [stage=...]`` (``-m`` for sweeps)."""

from __future__ import annotations

import sys
import traceback

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from lmaudit.config.overrides import with_canonical_overrides
from lmaudit.config.schema import register_configs
from lmaudit.pipeline.record import Terminated
from lmaudit.pipeline.sweep import JobFailed
from lmaudit.provenance.io import InputError

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | JobFailed | None:
    from lmaudit.pipeline import run

    sweeping = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        return run(cfg)
    except Terminated as e:  # SIGTERM: the run's MLflow record says KILLED, its lock is released
        print(f"error: stopped by {e}", file=sys.stderr)
        sys.exit(143)
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
    try:  # a study's groups by their short names (framing=track_p, judge/condition=P0, ...)
        sys.argv = with_canonical_overrides(sys.argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    main()
