"""lmaudit.runtime: a one-job process freezes what it builds to last; other processes are left alone.

Each case runs in a fresh interpreter: freezing is process-wide and would leak into the suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return {k: json.loads(v) for k, v in (line.split("=", 1) for line in out.stdout.split())}


PROBE = """
import atexit, gc, weakref
from lmaudit import runtime
atexit.register(lambda: print("at_exit_after=" + str(gc.get_freeze_count())))  # registered first: runs last
if ONE_JOB:
    runtime.one_job_process()
atexit.register(lambda: print("at_exit_before=" + str(gc.get_freeze_count())))  # runs first
class Node:
    pass
gc.disable() if START_DISABLED else gc.enable()
with runtime.long_lived():
    inside_enabled = gc.isenabled()
    kept = Node()  # alive after the block
    garbage = Node()
    garbage.me = garbage  # a cycle, dropped inside the block (an import's leftover frames, say)
    dropped = weakref.ref(garbage)
    del garbage
tracked = {id(o) for o in gc.get_objects()}  # frozen objects are not listed
print("kept_tracked=" + str(id(kept) in tracked).lower())
print("garbage_freed=" + str(dropped() is None).lower())
print("inside_enabled=" + str(inside_enabled).lower())
print("after_enabled=" + str(gc.isenabled()).lower())
print("one_job=" + str(runtime.is_one_job_process()).lower())
print("frozen_after_block=" + str(gc.get_freeze_count()))
later = [[i] for i in range(20000)]  # made outside the block, alive at exit
"""


def _probe(one_job: bool, start_disabled: bool = False) -> dict[str, object]:
    return _run(f"ONE_JOB = {one_job}\nSTART_DISABLED = {start_disabled}\n{PROBE}")


def test_outside_a_one_job_process_nothing_is_frozen_or_paused() -> None:
    got = _probe(False)
    assert got["one_job"] is False
    assert got["kept_tracked"] is True and got["frozen_after_block"] == 0
    assert got["inside_enabled"] is True and got["after_enabled"] is True
    assert got["at_exit_before"] == 0 and got["at_exit_after"] == 0  # nothing frozen at exit either


def test_a_one_job_process_frees_the_blocks_garbage_then_freezes_what_lives() -> None:
    got = _probe(True)
    assert got["one_job"] is True
    assert got["inside_enabled"] is False  # the collector is paused inside the block
    assert got["garbage_freed"] is True  # a cycle dropped inside is collected, not frozen
    assert got["kept_tracked"] is False  # what lives on is frozen: the collector no longer tracks it
    assert got["after_enabled"] is True
    # the 20,000 lists made after the block are frozen at exit, after the exit handlers
    # registered later (MLflow's, say), which still see them unfrozen
    base, after, before = got["frozen_after_block"], got["at_exit_after"], got["at_exit_before"]
    assert isinstance(base, int) and isinstance(after, int) and isinstance(before, int)
    assert before < base + 1000
    assert after >= base + 19000  # (a few objects of the probe itself die before exit)


def test_long_lived_leaves_a_disabled_collector_disabled() -> None:
    got = _probe(True, start_disabled=True)
    assert got["inside_enabled"] is False and got["after_enabled"] is False
    assert got["garbage_freed"] is True
