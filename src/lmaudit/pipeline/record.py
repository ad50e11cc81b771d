"""The record step: DVC views of a result, and the job's MLflow run (started before the
report is written, so the report can name it; marked FAILED if anything after that raises)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

from lmaudit.pipeline.audit import AuditRecord
from lmaudit.pipeline.context import experiment_name, run_name
from lmaudit.pipeline.registration import prediction_metrics, prediction_tags
from lmaudit.provenance.io import atomic_write_json, atomic_write_text
from lmaudit.studies.base import RunContext, Study, StudyResult

RUN_FILES = ("plan.json", "results.json", "audit_record.json", "report.html", "measurements.jsonl")


def write_dvc_views(out: Path, study: Study, result: StudyResult) -> None:
    """``metrics.json`` (headline numbers) and ``plots/*.csv`` (figure data) for ``dvc metrics``
    and ``dvc plots``; both are pure views of results.json."""
    metrics = {**result.metrics, **prediction_metrics(result.results)}
    atomic_write_json(out / "metrics.json", metrics)
    for name, rows in study.plot_data(result).items():
        buf = io.StringIO()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        atomic_write_text(out / "plots" / f"{name}.csv", buf.getvalue())


def _sweep_dir() -> Path | None:
    """The sweep directory, when this job is part of a ``-m`` sweep."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return None
    return Path(hc.sweep.dir)


def log_to_mlflow(
    ctx: RunContext,
    study: Study,
    result: StudyResult,
    audit: AuditRecord,
    write_report: Callable[[str | None], None],
    *,
    sweep_dir: Path | None,
    registration_file: Path | None,
) -> str | None:
    """Start the job's MLflow run (nested under the sweep's parent), write the report, log the
    run; returns its id (None with ``mlflow.enabled=false``)."""
    cfg, out = ctx.cfg, ctx.run_dir
    if not cfg.mlflow.enabled:
        write_report(None)
        return None
    from lmaudit.tracking.mlflow_log import fail_job, log_run, start_job, tracking_uri
    from lmaudit.tracking.sweeps import sweep_parent

    experiment = experiment_name(cfg)
    sweep = sweep_dir or _sweep_dir()
    parent = sweep_parent(sweep, cfg.paths.mlruns, experiment) if sweep is not None else None
    run_id = start_job(
        mlruns=cfg.paths.mlruns, experiment=experiment, run_name=run_name(cfg), parent_run_id=parent
    )
    audit.data["mlflow"] = {
        "run_id": run_id,
        "experiment": experiment,
        "tracking_uri": tracking_uri(cfg.paths.mlruns),
    }
    audit.save()
    try:
        write_report(run_id)
        plan_cfg = ctx.plan.config if ctx.plan is not None else study.plan_config(cfg)
        log_run(
            mlruns=cfg.paths.mlruns,
            run_id=run_id,
            params=plan_cfg,
            metrics={**result.metrics, **prediction_metrics(result.results)},
            tags={
                **result.tags,
                **prediction_tags(result.results),
                "plan_digest": str(audit.data.get("plan_digest")),
                "run_dir": str(out),
                "study": study.name,
            },
            artifacts=[out / n for n in RUN_FILES]
            + ([out / "artifacts"] if (out / "artifacts").is_dir() else [])
            + ([registration_file] if registration_file is not None else []),
        )
    except BaseException:  # the run's MLflow record says it failed rather than staying RUNNING
        fail_job(cfg.paths.mlruns, run_id)
        raise
    print(f"MLflow run {run_id} ({tracking_uri(cfg.paths.mlruns)})")
    return run_id
