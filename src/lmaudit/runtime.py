"""Garbage-collector policy of a one-job process (``python run.py`` without ``-m``).

Such a process spends its life with a large heap that never dies: torch, transformers, MLflow
and their modules (about 740,000 objects for the default audit). CPython's cyclic collector
re-scans all of them at every full collection, seven of those while they are being imported,
and once more when the interpreter shuts down (about 2 s after the last result is written).
:func:`one_job_process` stops that. Work done inside :func:`long_lived` (heavy imports, a
backend being built) runs with the collector paused; at its end one full collection frees
that work's cyclic garbage (an import leaves frames behind, which may hold the object being
built), and every object still alive is moved to the collector's permanent generation
(:func:`gc.freeze`). The whole heap is frozen again at exit, so shutdown does not walk it.

A frozen object is still freed when its last reference goes (reference counting); only a
frozen object that ends up in an unreachable reference cycle stays until the process exits.
Outside a one-job process (sweeps, notebooks, the test suite) :func:`long_lived` does nothing,
since those go on to build and drop further models.
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
    """Work whose objects live until the process ends (heavy imports, the run's backend): in a
    one-job process it runs with the cyclic collector paused, then its cyclic garbage is
    collected and what survives is frozen."""
    if not _one_job:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        if was_enabled:
            gc.enable()
