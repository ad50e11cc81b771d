"""Hydra callback: a parent MLflow run per sweep (``python run.py -m ...``).

``on_multirun_start`` creates the parent run and leaves its id in the sweep directory, where
every job (in this process or a launcher's worker) finds it and nests its own run under it;
``on_multirun_end`` logs the side-by-side comparison of the sweep's jobs to the parent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from lmaudit.provenance.io import atomic_write_json, atomic_write_text

PARENT_FILE = "mlflow_parent.json"


def _experiment(config: DictConfig) -> str:
    return str(config.mlflow.experiment or f"lmaudit-{config.study.name}")


def parent_run_id(sweep_dir: str | Path) -> str | None:
    p = Path(sweep_dir) / PARENT_FILE
    if not p.exists():
        return None
    return str(json.loads(p.read_text())["run_id"])


class MLflowSweepCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not config.mlflow.enabled:
            return
        from lmaudit.tracking.mlflow_log import _mlflow, ensure_experiment

        mlruns = config.paths.mlruns
        mlflow = _mlflow(mlruns)
        exp_id = ensure_experiment(mlruns, _experiment(config))
        sweep_dir = Path(config.hydra.sweep.dir)
        overrides = list(config.hydra.overrides.task)
        run = mlflow.start_run(
            experiment_id=exp_id,
            run_name=f"sweep {sweep_dir.name}",
            tags={
                "lmaudit.kind": "sweep",
                "sweep_dir": str(sweep_dir),
                "sweep_overrides": " ".join(overrides)[:5000],
            },
        )
        mlflow.end_run(status="RUNNING")
        atomic_write_json(
            sweep_dir / PARENT_FILE, {"run_id": run.info.run_id, "experiment": _experiment(config)}
        )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if not config.mlflow.enabled:
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        run_id = parent_run_id(sweep_dir)
        if run_id is None:
            return
        from lmaudit.tracking.compare import fetch_runs, table, to_csv, to_markdown
        from lmaudit.tracking.mlflow_log import _mlflow

        mlruns = config.paths.mlruns
        mlflow = _mlflow(mlruns)
        runs = fetch_runs(mlruns, [_experiment(config)], parent_run_id=run_id)
        header, rows = table(list(reversed(runs)))
        atomic_write_text(sweep_dir / "comparison.md", to_markdown(header, rows))
        atomic_write_text(sweep_dir / "comparison.csv", to_csv(header, rows))
        with mlflow.start_run(run_id=run_id):
            mlflow.log_metric("n_jobs", len(runs))
            mlflow.log_artifact(str(sweep_dir / "comparison.md"))
            mlflow.log_artifact(str(sweep_dir / "comparison.csv"))
        print(
            f"sweep of {len(runs)} jobs under MLflow parent run {run_id}; comparison in {sweep_dir}/comparison.md"
        )
