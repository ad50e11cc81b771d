"""The record step's files and signals: DVC views of a result, and SIGTERM raised where the run
is (so that its MLflow run is marked KILLED and its lock released). The MLflow run itself is
:mod:`lmaudit.pipeline.mlflow_run`."""

from __future__ import annotations

import contextlib
import csv
import io
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmaudit.pipeline.registration import prediction_metrics
from lmaudit.provenance.io import atomic_write_json, atomic_write_text
from lmaudit.studies.base import Study, StudyResult


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


class Terminated(BaseException):
    """SIGTERM, raised where the run is (so its MLflow run is marked KILLED and its lock freed)."""


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM raises :class:`Terminated`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        what = f"signal {signal.Signals(signum).name}"
        if _DEFER.depth:
            _DEFER.pending = what
            return
        raise Terminated(what)

    old = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


class _Deferred:
    """A SIGTERM that arrived while the MLflow run was being created."""

    depth = 0
    pending: str | None = None


_DEFER = _Deferred()


def hold_sigterm() -> bool:
    """From now on a SIGTERM is recorded, not raised (the handler runs in the main thread
    whichever thread the signal reached, so blocking the signal would not be enough)."""
    _DEFER.depth += 1
    return True


def release_sigterm(held: bool) -> None:
    """Raise a SIGTERM recorded while held (now that the run's id is known)."""
    if not held:
        return
    _DEFER.depth = max(0, _DEFER.depth - 1)
    pending = _DEFER.pending
    if pending and not _DEFER.depth:
        _DEFER.pending = None
        raise Terminated(pending)
