"""The record step's files and signals: DVC views of a result, and SIGTERM raised where the run
is (so that its MLflow run is marked KILLED and its lock released; :mod:`lmaudit.interrupts`).
The MLflow run itself is :mod:`lmaudit.pipeline.mlflow_run`."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from lmaudit.interrupts import hold_sigterm, release_sigterm, signals_raise
from lmaudit.pipeline.registration import prediction_metrics
from lmaudit.provenance.io import atomic_write_json, atomic_write_text
from lmaudit.studies.base import Study, StudyResult

__all__ = ["hold_sigterm", "release_sigterm", "signals_raise", "write_dvc_views"]


def write_dvc_views(out: Path, study: Study, result: StudyResult) -> None:
    """``metrics.json`` (headline numbers) and ``plots/*.csv`` (figure data) for ``dvc metrics``
    and ``dvc plots``; both are pure views of results.json. The metrics sit under the study's
    name (what MLflow logs, as it logs it), so ``dvc metrics show`` groups each study's columns
    together instead of interleaving four studies' keys."""
    metrics = {**result.metrics, **prediction_metrics(result.results)}
    atomic_write_json(out / "metrics.json", {study.name: metrics})
    for name, rows in study.plot_data(result).items():
        buf = io.StringIO()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        atomic_write_text(out / "plots" / f"{name}.csv", buf.getvalue())
