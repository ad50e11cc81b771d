"""A single run's MLflow calls, made by a second process started when the run starts.

Importing MLflow with its SQLite store takes about 2 s (MLflow, SQLAlchemy, Alembic, pandas,
FastAPI, ...), on one core. A single run that will record (``python run.py`` without ``-m``,
stage ``all``, ``analyze`` or ``report``, ``mlflow.enabled``) starts this worker first thing
(:func:`start`), so that import happens on the other core while the main process imports torch
and loads the model, which use one. The record step then makes its MLflow calls through
:func:`call`: each is sent to the worker and waited for, so they run one at a time, in the
same order, with the same arguments and results as in process. Without a worker (sweeps,
notebooks, the test suite) :func:`call` calls the function itself.

* The worker ignores SIGINT and SIGTERM. The main process decides how a run ended and says so
  through the worker (a run marked KILLED); the worker exits when the main process tells it
  to, closes the pipe, or dies.
* If the worker could not start (its imports failed, or it died before its first call), the
  calls run in process: nothing is lost, only the time.
* An error inside a call comes back as :class:`TrackingError`, naming the original exception.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

#: What the worker imports before it says it is ready (MLflow with its SQLite store).
IMPORTS = ("lmaudit.tracking.mlflow_log", "lmaudit.tracking.sweeps", "mlflow.store.tracking.sqlalchemy_store")
#: The calls the worker answers: module-level functions of these modules, by qualified name.
MODULES = ("lmaudit.tracking.mlflow_log", "lmaudit.tracking.sweeps")

T = TypeVar("T")


class TrackingError(Exception):
    """An MLflow call failed in the worker (the message names the original exception)."""


def _warm(mlruns: str) -> None:
    """Read-only work of the first calls, done while the main process is busy: resolving a
    run's default tags (MLflow imports IPython and GitPython for it) and opening an existing
    store (engine, schema check). A store that does not exist yet is not created here."""
    with contextlib.suppress(Exception):  # the real call reports any problem
        from mlflow.tracking.context.registry import resolve_tags

        resolve_tags({})
    if (Path(mlruns) / "mlflow.db").is_file():
        with contextlib.suppress(Exception):
            from mlflow import MlflowClient

            MlflowClient().search_experiments(max_results=1)


def _serve(conn: Connection, mlruns: str, imports: tuple[str, ...]) -> None:
    """The worker: import, say ready (or why not), then answer calls until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    import importlib

    try:
        for name in imports:
            importlib.import_module(name)
        from lmaudit.tracking.mlflow_log import _mlflow

        _mlflow(mlruns)  # the settings and tracking URI the in-process path would set
    except BaseException as e:
        conn.send(("failed", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", None))
    _warm(mlruns)
    while True:
        try:
            msg = conn.recv()
        except EOFError:  # the main process is gone
            return
        if msg is None:  # every call has been answered, so there is nothing left to finish:
            conn.close()  # skip the interpreter's shutdown (a full collection of MLflow's heap)
            os._exit(0)
        seq, module, name, args, kwargs = msg
        try:
            if module not in MODULES:
                raise ValueError(f"not a tracking module: {module}")
            result = getattr(importlib.import_module(module), name)(*args, **kwargs)
        except BaseException as e:  # reported to the caller, which decides
            conn.send((seq, "error", f"{type(e).__name__}: {e}"))
        else:
            try:
                conn.send((seq, "ok", result))
            except Exception as e:  # a result that does not pickle
                conn.send(
                    (seq, "error", f"{name} returned what cannot be sent back: {type(e).__name__}: {e}")
                )


class Worker:
    """The worker process and the pipe to it."""

    def __init__(self, mlruns: str | Path, imports: tuple[str, ...] = IMPORTS):
        # a fresh interpreter running this module (not multiprocessing's spawn, which would first
        # re-import the main script, run.py, with Hydra and every study's config schema)
        self._conn, child = multiprocessing.Pipe()
        src = str(Path(__file__).resolve().parents[2])  # where lmaudit is imported from here
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(child.fileno()), str(mlruns), *imports],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        child.close()
        self.ready: bool | None = None  # None until the worker has said whether it started
        self.used = False
        self._seq = 0

    def _wait_ready(self) -> bool:
        if self.ready is None:
            try:
                state, _ = self._conn.recv()
                self.ready = state == "ready"
            except (EOFError, OSError):
                self.ready = False
            if not self.ready:
                self.close()
        return self.ready

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.used = True
        self._seq += 1
        try:
            self._conn.send((self._seq, fn.__module__, fn.__name__, args, kwargs))
            while True:  # skip the answer to a call whose wait was interrupted (Ctrl-C)
                seq, state, value = self._conn.recv()
                if seq == self._seq:
                    break
        except (EOFError, OSError) as e:
            raise TrackingError(f"the MLflow worker process stopped during {fn.__name__} ({e!r})") from None
        if state != "ok":
            raise TrackingError(str(value))
        result: T = value
        return result

    def close(self) -> None:
        """Stop the worker: told to, if it answered calls (it then exits at once); killed
        otherwise (it may still be importing, which the run no longer needs)."""
        if self.used and self.ready and self.process.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                self._conn.send(None)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._conn.close()


_worker: Worker | None = None


def start(mlruns: str | Path, imports: tuple[str, ...] = IMPORTS) -> Worker | None:
    """Start this process's worker for the store under ``mlruns`` (once; None where the main
    process has MLflow already: nothing to overlap)."""
    global _worker
    if _worker is None and "mlflow" not in sys.modules:
        _worker = Worker(mlruns, imports)
        atexit.register(stop)
    return _worker


def stop() -> None:
    global _worker
    if _worker is not None:
        _worker.close()
        _worker = None


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, made by the worker when there is one that started, else here.
    ``fn`` is a module-level function of :data:`MODULES`."""
    if _worker is not None and _worker._wait_ready():
        return _worker.call(fn, *args, **kwargs)
    return fn(*args, **kwargs)


if __name__ == "__main__":  # the worker process: <fd of its end of the pipe> <mlruns> <imports...>
    _serve(Connection(int(sys.argv[1])), sys.argv[2], tuple(sys.argv[3:]))
