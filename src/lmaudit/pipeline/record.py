"""The record step's files and signals: DVC views of a result, and SIGTERM raised where the run
is (so that its MLflow run is marked KILLED and its lock released; :mod:`lmaudit.interrupts`).
The MLflow run itself is :mod:`lmaudit.pipeline.mlflow_run`."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from lmaudit.interrupts import hold_sigterm, release_sigterm, signals_raise
from lmaudit.provenance.io import atomic_write_json, atomic_write_text
from lmaudit.studies.base import Study, StudyResult

__all__ = ["dvc_metrics", "hold_sigterm", "release_sigterm", "signals_raise", "write_dvc_views"]


def write_dvc_views(out: Path, study: Study, result: StudyResult) -> None:
    """``metrics.json`` (headline numbers) and ``plots/*.csv`` (figure data) for ``dvc metrics``
    and ``dvc plots``; both are pure views of results.json. ``metrics.json`` is flat and small,
    so that ``dvc metrics show`` prints a row per run that a terminal can show: the study's
    :attr:`~lmaudit.studies.base.Study.dvc_metrics` under their MLflow names, then, for a run
    that scores registered predictions, how many it scored (``predictions``) and how many held
    (``held``). Every metric (per item, per condition, per prediction) is in MLflow and every
    number in results.json."""
    atomic_write_json(out / "metrics.json", dvc_metrics(study, result))
    for name, rows in study.plot_data(result).items():
        buf = io.StringIO()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        atomic_write_text(out / "plots" / f"{name}.csv", buf.getvalue())


def dvc_metrics(study: Study, result: StudyResult) -> dict[str, float]:
    """The body of ``metrics.json`` (see :func:`write_dvc_views`)."""
    names = study.dvc_metrics or tuple(result.metrics)
    out = {k: result.metrics[k] for k in names if k in result.metrics}
    if result.predictions:
        out["predictions"] = len(result.predictions)
        out["held"] = sum(p.outcome == "held" for p in result.predictions)
    return out
