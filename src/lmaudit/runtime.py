"""Garbage-collector policy of a one-job process (``python run.py`` without ``-m``).

Such a process spends its life with a large heap that never dies: torch, transformers, MLflow
and their modules (about 740,000 objects for the default audit) and the loaded model. CPython's
cyclic collector re-scans all of them at every full collection, seven of those while they are
being imported, and once more when the interpreter shuts down (about 2 s after the last result
is written). :func:`one_job_process` stops that: objects made inside :func:`long_lived` (heavy
imports, a backend being built) are made with the collector paused and then moved to its
permanent generation (:func:`gc.freeze`), and the whole heap is frozen at exit, so shutdown
does not walk it.

Outside a one-job process (sweeps, notebooks, the test suite) :func:`long_lived` does nothing:
a frozen object is never collected, so freezing the heap of a process that goes on to build and
drop further models could keep them alive.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from collections.abc import Iterator

_one_job = False


def one_job_process() -> None:
    """Declare this process a single job that exits when it is done (run.py, not in a sweep)."""
    global _one_job
    if not _one_job:
        _one_job = True
        # registered first, so it runs last: after MLflow's and every other exit handler
        atexit.register(gc.freeze)


def is_one_job_process() -> bool:
    return _one_job


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """Objects made inside live until the process ends (imported modules, the run's backend):
    in a one-job process they are made with the cyclic collector paused and frozen afterwards."""
    if not _one_job:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
