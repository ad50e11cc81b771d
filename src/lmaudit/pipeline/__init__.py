"""The pipeline: stages, the run context, the audit record, prediction scoring and the record
step (DVC views, MLflow). ``run.py`` composes the Hydra config and calls :func:`run`."""

from lmaudit.pipeline.context import experiment_name, run_dir, run_name
from lmaudit.pipeline.stages import STAGES, run

__all__ = ["STAGES", "experiment_name", "run", "run_dir", "run_name"]
