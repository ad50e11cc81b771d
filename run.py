"""lmaudit entry point: ``python run.py [group=option ...] [stage=...]`` (``-m`` for sweeps)."""

from __future__ import annotations

import sys
import traceback

if __name__ == "__main__" and not any(a.startswith("-") for a in sys.argv[1:]):
    # one run given only overrides (no -m, --cfg, --help, ...): MLflow starts importing in a
    # second process now, on the other core (lmaudit.tracking.worker); main() hands it the
    # store, or stops it when the run will not record
    from lmaudit.tracking.worker import prestart

    prestart()

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from lmaudit.config.hydra_mode import skip_mode_probe
from lmaudit.config.overrides import with_canonical_overrides
from lmaudit.config.schema import register_configs
from lmaudit.pipeline.record import Terminated
from lmaudit.pipeline.sweep import JobFailed
from lmaudit.provenance.io import InputError
from lmaudit.runtime import finish, one_job_process

register_configs()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | JobFailed | None:
    from lmaudit.pipeline import run

    sweeping = HydraConfig.get().mode == RunMode.MULTIRUN
    if not sweeping:  # one job, then exit: the heap of its imports and model is never re-scanned
        one_job_process()
        from lmaudit.tracking.worker import start, stop

        if cfg.mlflow.enabled and cfg.stage in ("all", "analyze", "report"):
            # MLflow imports in a second process while this one loads the model (tracking.worker)
            start(cfg.paths.mlruns)
        else:
            stop()  # the one started on spec
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
    skip_mode_probe(sys.argv[1:])  # Hydra's first composition only reads hydra.mode, never set here
    main()
    finish(__file__)  # a one-job run that got here succeeded: exit without tearing the heap down
