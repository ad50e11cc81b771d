"""A single run's MLflow calls, made by a second process started when the run starts.

Importing MLflow with its SQLite store takes 2.5-3.5 s of one core (MLflow, SQLAlchemy,
Alembic, pandas, FastAPI, ...). ``python run.py`` given only overrides starts this worker first
thing, before Hydra (:func:`prestart`), so that import happens on the other core while the main
process composes its config, imports torch and loads the model, which use one, and is mostly
done before the scoring uses both (started after the config, it overlapped the scoring's first
seconds and slowed it). Once the config is composed, a single run that will record (without
``-m``; stage ``all``, ``analyze`` or ``report``; ``mlflow.enabled``) hands the worker its store
(:func:`start`); any other stops it. The record step then makes its MLflow calls through
:func:`call`: each is sent to the worker and waited for, so they run one at a time, in the
same order, with the same arguments and results as in process. Without a worker (sweeps,
notebooks, the test suite) :func:`call` calls the function itself.

* Signals are the main process's to handle: the worker ignores SIGINT and SIGTERM (a Ctrl-C
  reaches the whole process group). When a signal interrupts the main process while it waits
  for the worker, the worker is killed on the spot (its call stops where it is, as it would
  have in process) and the pipe, which may be half-way through a message, is never used
  again: the run's remaining calls (marking its MLflow run KILLED) are made in process.
* The worker never outlives the main process: it exits when told to, when the pipe closes, or
  when its parent dies (``PR_SET_PDEATHSIG`` on Linux, and a watch on its parent's pid), even
  mid-call; a run left RUNNING that way is marked KILLED by the next run of its directory, as
  after an in-process run killed outright.
* If the worker cannot be started or its imports fail, the calls run in process: nothing is
  lost, only the time. If it stops later, the call fails and is reported as a tracking failure
  (results and report are written regardless).
* An error inside a call comes back as :class:`TrackingError`, naming the original exception.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing import Pipe
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


# ------------------------------------------------------------------------------ the worker


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


def _die_with(parent: int) -> None:
    """Exit as soon as the process ``parent`` is gone (it was killed outright): at once by the
    kernel where it can (Linux), else within a tenth of a second by watching the parent pid."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.1)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="lmaudit-mlflow-parent", daemon=True).start()


def _serve(conn: Connection, parent: int, mlruns: str, imports: Sequence[str]) -> None:
    """The worker: import, say ready (or why not), then answer calls until told to stop.
    Started before its run knew the store (``mlruns`` empty), it first waits for the store's
    directory (or for ``None``: the run will not record)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with(parent)
    try:
        # first the settings the in-process path makes (telemetry off, ...): MLflow reads them
        # when it is imported
        from lmaudit.tracking.mlflow_log import _mlflow, mlflow_settings

        mlflow_settings()
        for name in imports:
            importlib.import_module(name)
    except BaseException as e:
        conn.send(("failed", f"{type(e).__name__}: {e}"))
        return
    cwd = None
    if not mlruns:
        try:
            msg = conn.recv()
        except Exception:  # the main process is gone
            os._exit(1)
        if msg is None:
            conn.close()
            os._exit(0)
        cwd, mlruns = msg
    try:
        if cwd:  # paths in calls are the main process's, which may have moved since this one
            os.chdir(cwd)  # started (hydra.job.chdir)
        _mlflow(mlruns)
    except BaseException as e:
        conn.send(("failed", f"{type(e).__name__}: {e}"))
        return
    _warm(mlruns)  # before "ready": no call could start before it ends anyway
    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except Exception:  # the main process is gone, or the pipe is out of step: stop
            os._exit(1)
        if msg is None:  # every call has been answered, so there is nothing left to finish:
            conn.close()  # skip the interpreter's shutdown (a full collection of MLflow's heap)
            os._exit(0)
        module, name, args, kwargs = msg
        try:
            if module not in MODULES:
                raise ValueError(f"not a tracking module: {module}")
            result = getattr(importlib.import_module(module), name)(*args, **kwargs)
        except BaseException as e:  # reported to the caller, which decides
            conn.send(("error", f"{type(e).__name__}: {e}"))
        else:
            try:
                conn.send(("ok", result))
            except Exception as e:  # a result that does not pickle
                conn.send(("error", f"{name} returned what cannot be sent back: {type(e).__name__}: {e}"))


def main(argv: Sequence[str]) -> None:
    """Entry point of the worker process: ``<pipe fd> <parent pid> <mlruns> <imports...>``."""
    _serve(Connection(int(argv[0])), int(argv[1]), argv[2], argv[3:])


# ------------------------------------------------------------------------- the main side

#: Started with ``python -P -c`` (no working directory on sys.path), importing lmaudit from
#: where the main process did: that directory goes first only if it is not on the path already
#: (compared resolved, as it is given).
_BOOT = (
    "import os, sys; p = sys.argv[1]; "
    "p in {os.path.realpath(q) for q in sys.path} or sys.path.insert(0, p); "
    "from lmaudit.tracking.worker import main; main(sys.argv[2:])"
)


class Worker:
    """The worker process and the pipe to it."""

    def __init__(self, mlruns: str | Path | None, imports: Sequence[str] = IMPORTS):
        """``mlruns`` None: the store comes later (:meth:`give_store`)."""
        # a fresh interpreter running main() (not multiprocessing's spawn, which would first
        # re-import the main script, run.py, with Hydra and every study's config schema)
        self.mlruns = None if mlruns is None else str(mlruns)
        self.imports = tuple(imports)
        self.environment = _mlflow_environment()  # what MLflow reads from it, as the worker got it
        self._conn, child = Pipe()
        home = str(Path(__file__).resolve().parents[2])  # the directory lmaudit is imported from
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-P",
                    "-c",
                    _BOOT,
                    home,
                    str(child.fileno()),
                    str(os.getpid()),
                    self.mlruns or "",
                    *imports,
                ],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        finally:
            child.close()
        self.ready: bool | None = None  # None until the worker has said whether it started
        self.used = False

    def give_store(self, mlruns: str | Path) -> None:
        """Tell a worker started without a store (:func:`prestart`) which one its calls use."""
        self.mlruns = str(mlruns)
        try:
            self._conn.send((os.getcwd(), self.mlruns))
        except (OSError, ValueError):  # it stopped (its imports failed): the calls run here
            self.ready = False
            self.close()

    def _abandon(self) -> None:
        """A signal reached the main process while it was talking to the worker: kill the
        worker, whatever it was doing, and never use the pipe again (it may be out of step)."""
        self.ready = False
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()
        self._conn.close()

    def _wait_ready(self) -> bool:
        if self.ready is None:
            try:
                state, _ = self._conn.recv()
                self.ready = state == "ready"
            except (EOFError, OSError):
                self.ready = False
            except BaseException:
                self._abandon()
                raise
            if not self.ready:
                self.close()
        return self.ready

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.used = True
        try:
            self._conn.send((fn.__module__, fn.__name__, args, kwargs))
            state, value = self._conn.recv()
        except (EOFError, OSError) as e:
            self._abandon()
            raise TrackingError(f"the MLflow worker process stopped during {fn.__name__} ({e!r})") from None
        except BaseException:  # a signal while talking to the worker: its call stops too
            self._abandon()
            raise
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


def _mlflow_environment() -> dict[str, str]:
    """The environment variables MLflow reads (``MLFLOW_*``)."""
    return {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_")}


def _spawn(mlruns: str | Path | None, imports: Sequence[str]) -> Worker | None:
    global _worker
    try:
        _worker = Worker(mlruns, imports)
    except (OSError, ValueError):
        return None
    atexit.register(stop)
    return _worker


def prestart(imports: Sequence[str] = IMPORTS) -> Worker | None:
    """Start this process's worker before its store is known, so that MLflow's import starts
    at once; :func:`start` then gives it the store, or :func:`stop` stops it."""
    if _worker is None and "mlflow" not in sys.modules:
        return _spawn(None, imports)
    return _worker


def start(mlruns: str | Path, imports: Sequence[str] = IMPORTS) -> Worker | None:
    """This process's worker for the store under ``mlruns``: the one :func:`prestart` started,
    given the store, or a new one (once). A prestarted worker is replaced by a new one when the
    ``MLFLOW_*`` environment changed since it started (MLflow reads it when imported). None
    where the main process has MLflow already (nothing to overlap) or the worker cannot be
    started (the calls then run in process)."""
    if _worker is not None and _worker.mlruns is None:
        if _worker.environment == _mlflow_environment() and tuple(_worker.imports) == tuple(imports):
            _worker.give_store(mlruns)
            return _worker
        stop()
    if _worker is None and "mlflow" not in sys.modules:
        return _spawn(mlruns, imports)
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
