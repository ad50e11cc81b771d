"""lmaudit.runtime: a one-job process freezes what it builds to last; other processes are left alone.

Each case runs in a fresh interpreter: freezing is process-wide and would leak into the suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


FINISH = """
import atexit, sys, threading
from concurrent.futures import ThreadPoolExecutor
from lmaudit import runtime
if ONE_JOB:
    runtime.one_job_process()
atexit.register(lambda: print("handler=true"))
class Teardown:  # alive until the interpreter tears the modules down
    def __del__(self):
        print("torn_down=true", flush=True)
sentinel = Teardown()
late = threading.Event()
def work():
    late.wait()
    sys.stdout.write("thread_done=true\\n")  # one write: print's text and end are two, and
    # with -u another thread's write can fall between them
threading.Thread(target=work).start()  # not a daemon: the exit waits for it
pool = ThreadPoolExecutor(max_workers=1)  # never shut down: threading's exit hook does it
pool.submit(late.set)
sys.stdout.write("unflushed=true ")  # no newline, and stdout is a pipe: still in the buffer
runtime.finish(__file__, 3)
print("returned=true")
"""

#: runs the probe as ``runpy`` does for a wrapper, then goes on
WRAPPER = """
import runpy, sys
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
finally:
    print("wrapper_went_on=true")
"""


def _finish(tmp_path: Path, one_job: bool, *how: str) -> tuple[int, dict[str, str]]:
    probe = tmp_path / "probe.py"
    probe.write_text(f"ONE_JOB = {one_job}\n{FINISH}", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, *how, str(probe)],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,  # (python -i: its prompt reads end of input and exits)
    )
    assert done.stderr == "" or {"-X", "-i"} & set(how), done.stderr
    return done.returncode, dict(w.split("=") for w in done.stdout.split())


#: what any exit does: the thread and the pool waited for, the handler run, the buffer flushed
EXIT = {"unflushed": "true", "thread_done": "true", "handler": "true"}


def test_finish_ends_a_one_job_process_after_its_threads_handlers_and_output(tmp_path: Path) -> None:
    for how in ((), ("-X", "importtime"), ("-u",)):
        code, words = _finish(tmp_path, True, *how)
        assert code == 3, how
        assert words == EXIT, (how, words)  # and no teardown: the finaliser never ran


def test_finish_elsewhere_returns_and_the_interpreter_exits_as_usual(tmp_path: Path) -> None:
    usual = {**EXIT, "returned": "true", "torn_down": "true"}  # the teardown ran the finaliser
    assert _finish(tmp_path, False) == (0, usual)  # not a one-job process
    # a one-job process started on another script (a profiler, a test) that then goes on
    # (a runner's copy of the probe's globals is in a cycle: its finaliser may or may not run)
    for how, extra in (
        (("-c", WRAPPER), {"wrapper_went_on": "true"}),
        (("-m", "cProfile", "-o", str(tmp_path / "prof")), {}),
        (("-i",), {}),  # started on the probe, but an interactive prompt follows the script
    ):
        code, words = _finish(tmp_path, True, *how)
        words.pop("torn_down", None)
        assert (code, words) == (0, {**EXIT, "returned": "true", **extra}), how
    assert (tmp_path / "prof").stat().st_size > 0  # the profiler wrote its result after the run


def test_started_on_reads_the_interpreters_own_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import lmaudit.runtime as runtime

    cases = {
        ("python", "run.py", "model=x"): True,
        ("python", "-X", "importtime", "-u", "run.py"): True,
        ("python", "-Ximporttime", "./run.py"): True,
        ("python", "-W", "ignore", "run.py"): True,
        ("python", "other.py", "run.py"): False,
        ("python", "-c", "import run", "run.py"): False,
        ("python", "-m", "cProfile", "run.py"): False,
        ("python", "-mcProfile", "run.py"): False,
        ("python", "-", "run.py"): False,
        ("python",): False,
    }
    for argv, expected in cases.items():
        monkeypatch.setattr(sys, "orig_argv", list(argv))
        assert runtime.started_on(REPO / "run.py") is expected, argv
