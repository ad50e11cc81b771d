"""SIGTERM during a run: raised where the run is, never inside another library's event loop, and
the process ends within seconds of it whatever the code it interrupted does.

* :func:`signals_raise`: while its block runs (in the main thread), SIGTERM raises
  :class:`Terminated`, so the run unwinds (its MLflow run is marked KILLED, its folder's lock
  released) and ``run.py`` exits 143.
* :func:`hold_sigterm` / :func:`release_sigterm`, and :func:`sigterm_deferred` around a call
  into a library that runs its own asyncio loop (inspect_ai's log reader): a SIGTERM arriving
  meanwhile is recorded, not raised, and raised once the call returns. Raised inside the loop,
  asyncio would keep the exception in a task (or a worker thread) and the process would wait
  for it forever, holding the run folder's lock.
* A watchdog: from the moment a SIGTERM arrives, the process has :data:`GRACE_S` seconds to end
  on its own; past that (a library swallowed the exception, a thread that does not stop) it is
  ended with exit status 143 and a line saying so. The kernel releases the folder's lock with
  the process; the next run of the folder takes over the lock file and marks a run it left
  RUNNING in MLflow as KILLED.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from lmaudit.errors import Terminated

__all__ = ["GRACE_S", "hold_sigterm", "release_sigterm", "signals_raise", "sigterm_deferred"]

#: seconds a process has to end once SIGTERM arrived (then it is ended, exit status 143): long
#: enough for a loaded machine to mark the MLflow run KILLED and free the run folder's lock (10 s
#: was not, on a busy 2-core host), within the 30 s SLURM leaves between SIGTERM and SIGKILL
GRACE_S = 25.0
_EXIT_STATUS = 128 + signal.SIGTERM


class _Deferred:
    """SIGTERMs held (while an MLflow run is created, while a library's loop runs) and the one
    that arrived meanwhile."""

    depth = 0
    pending: str | None = None


_DEFER = _Deferred()


def _end_now(what: str, grace_s: float) -> None:
    print(
        f"error: stopped by {what}; the run did not end within {grace_s:g} s of it and is ended now "
        "(its folder's lock goes with the process)",
        file=sys.stderr,
        flush=True,
    )
    os._exit(_EXIT_STATUS)


def _arm_watchdog(what: str, grace_s: float) -> None:
    timer = threading.Timer(grace_s, _end_now, args=(what, grace_s))
    timer.daemon = True  # a process that ends on its own is not held by it
    timer.start()


@contextlib.contextmanager
def signals_raise(*, grace_s: float | None = GRACE_S) -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM raises :class:`Terminated` (or is
    held, see :func:`hold_sigterm`), and the process is ended ``grace_s`` seconds later if it
    is still alive (None: never; for a caller that handles :class:`Terminated` and goes on)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        what = f"signal {signal.Signals(signum).name}"
        if grace_s is not None:
            _arm_watchdog(what, grace_s)
        if _DEFER.depth:
            _DEFER.pending = what
            return
        raise Terminated(what)

    old = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def hold_sigterm() -> bool:
    """From now on a SIGTERM is recorded, not raised (the handler runs in the main thread
    whichever thread the signal reached, so blocking the signal would not be enough)."""
    _DEFER.depth += 1
    return True


def release_sigterm(held: bool) -> None:
    """Raise a SIGTERM recorded while held (the outermost hold released)."""
    if not held:
        return
    _DEFER.depth = max(0, _DEFER.depth - 1)
    pending = _DEFER.pending
    if pending and not _DEFER.depth:
        _DEFER.pending = None
        raise Terminated(pending)


@contextlib.contextmanager
def sigterm_deferred() -> Iterator[None]:
    """A SIGTERM arriving while the block runs is raised when it returns (or raises)."""
    held = hold_sigterm()
    try:
        yield
    finally:
        release_sigterm(held)
