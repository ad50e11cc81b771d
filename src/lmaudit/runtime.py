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

When a one-job process has done its work, :func:`finish` ends it the way the interpreter
would, less the last step: threads are joined, exit handlers run (the MLflow worker is
stopped, logging flushed) and standard output and error are flushed, but the modules and the
heap are not torn down one object at a time (0.22 s to 0.07 s after the default audit, for
memory the operating system takes back at once). Every file a run writes is complete and
closed before then (:mod:`lmaudit.provenance.io` writes by rename).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import threading
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


#: interpreter options that take the next argument as their value (``python -X importtime``)
_OPTIONS_WITH_VALUE = frozenset({"-X", "-W", "--check-hash-based-pycs"})


def started_on(script: str | os.PathLike[str]) -> bool:
    """Whether this interpreter was started as ``python [options] script ...``: not with
    ``-c`` or ``-m``, and not on another script that runs ``script`` (a profiler, a test)."""
    args = iter(getattr(sys, "orig_argv", [])[1:])
    for arg in args:
        if arg.startswith(("-c", "-m")):  # -c code, -m module, or either run together with its value
            return False
        if arg in _OPTIONS_WITH_VALUE:
            next(args, None)
        elif not arg.startswith("-") or arg == "-":
            return arg != "-" and os.path.realpath(arg) == os.path.realpath(script)
    return False


def finish(script: str | os.PathLike[str], code: int = 0) -> None:
    """End a one-job process whose work is done with exit status ``code``: non-daemon threads
    joined, exit handlers run and standard streams flushed, as at any exit, then
    :func:`os._exit` instead of the interpreter's teardown. Only where the interpreter was
    started on ``script`` (:func:`started_on`), with no tracer or profiler set and no
    interactive prompt to follow (``python -i``): anything that runs the script and then goes
    on (``python -m cProfile``, a test's wrapper) keeps the rest of its process. Anywhere else (sweeps, tests, an interpreter without
    :func:`threading._shutdown`) it returns, and the caller exits as usual."""
    shutdown = getattr(threading, "_shutdown", None)  # what the interpreter runs first at exit
    if (
        not _one_job
        or shutdown is None
        or threading.current_thread() is not threading.main_thread()
        or sys.gettrace() is not None
        or sys.getprofile() is not None
        or sys.flags.inspect  # python -i: the prompt comes after the script
        or os.environ.get("PYTHONINSPECT")
        or not started_on(script)
    ):
        return
    shutdown()  # joins non-daemon threads, after threading's own exit hooks (executors)
    atexit._run_exitfuncs()  # every handler, last registered first; each runs once
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    os._exit(code)
