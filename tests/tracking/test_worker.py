"""The run's MLflow worker (lmaudit.tracking.worker): calls made there land in the store as
in process, errors come back named, a worker that cannot start leaves the calls in process,
signals meant for the run do not stop it, and it never outlives the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

REPO = Path(__file__).resolve().parents[2]


def _script(tmp_path: Path, body: str) -> dict:
    code = (
        "import json, os, signal, sys\n"
        "from lmaudit.tracking import worker\n"
        "from lmaudit.tracking.mlflow_log import fail_job, log_run, start_job\n"
        f"mlruns = {str(tmp_path / 'mlruns')!r}\n"
        f"{body}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _store(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A client of the store the scripts under ``tmp_path`` logged to."""
    import mlflow

    return mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie counts: where nothing reaps orphans, an exited
    worker stays one)."""
    for _ in range(50):
        try:
            os.kill(pid, 0)
            stat = Path(f"/proc/{pid}/stat")
            if stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


def test_calls_made_by_the_worker_land_in_the_store_and_the_caller_never_imports_mlflow(
    tmp_path: Path,
) -> None:
    got = _script(
        tmp_path,
        "w = worker.start(mlruns)\n"
        "run_id = worker.call(start_job, mlruns=mlruns, experiment='e', run_name='job 1', run_dir='/r')\n"
        "worker.call(log_run, mlruns=mlruns, run_id=run_id, params={'study': {'name': 'qq'}, 'n': 3},\n"
        "            metrics={'m': 0.25, 'nan': float('nan')}, tags={'t': 'x'}, artifacts=[])\n"
        "other = worker.call(start_job, mlruns=mlruns, experiment='e', run_name='job 2')\n"
        "worker.call(fail_job, mlruns, other, 'KILLED')\n"
        "pid = w.process.pid\n"
        "in_main = 'mlflow' in sys.modules\n"
        "worker.stop()\n"
        "print(json.dumps({'run_id': run_id, 'other': other, 'pid': pid, 'in_main': in_main,\n"
        "                  'exitcode': w.process.returncode}))",
    )
    assert got["in_main"] is False  # the main process never imported MLflow
    assert got["exitcode"] == 0  # told to stop after its calls, it exited by itself
    assert _gone(got["pid"])
    client = _store(tmp_path)
    run = client.get_run(got["run_id"])
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "job 1"
    assert run.data.params == {"study.name": "qq", "n": "3"}
    assert run.data.metrics == {"m": 0.25}  # the non-finite metric is dropped, as in process
    assert run.data.tags["t"] == "x" and run.data.tags["lmaudit.run_dir"] == "/r"
    assert client.get_run(got["other"]).info.status == "KILLED"


def test_an_error_in_the_worker_comes_back_named_and_the_worker_goes_on(tmp_path: Path) -> None:
    got = _script(
        tmp_path,
        "worker.start(mlruns)\n"
        "try:\n"
        "    worker.call(log_run, mlruns=mlruns, run_id='0' * 32, params={}, metrics={}, tags={}, artifacts=[])\n"
        "    error = None\n"
        "except worker.TrackingError as e:\n"
        "    error = str(e)\n"
        "after = worker.call(start_job, mlruns=mlruns, experiment='e', run_name='r')\n"
        "print(json.dumps({'error': error, 'after': after}))",
    )
    assert got["error"] is not None and got["error"].startswith("MlflowException: ")
    assert "0" * 32 in got["error"]  # MLflow's own message, naming the run it could not find
    assert len(got["after"]) == 32


def test_a_worker_that_cannot_start_leaves_the_calls_in_process(tmp_path: Path) -> None:
    got = _script(
        tmp_path,
        "w = worker.start(mlruns, imports=('lmaudit_no_such_module',))\n"
        "run_id = worker.call(start_job, mlruns=mlruns, experiment='e', run_name='r')\n"
        "print(json.dumps({'run_id': run_id, 'in_main': 'mlflow' in sys.modules, 'ready': w.ready,\n"
        "                  'pid': w.process.pid}))",
    )
    assert got["ready"] is False and got["in_main"] is True  # made here instead
    assert _gone(got["pid"])
    client = _store(tmp_path)
    assert client.get_run(got["run_id"]).info.status == "RUNNING"  # start_job leaves it running


def test_the_worker_ignores_the_signals_meant_for_the_run(tmp_path: Path) -> None:
    got = _script(
        tmp_path,
        "w = worker.start(mlruns)\n"
        "first = worker.call(start_job, mlruns=mlruns, experiment='e', run_name='a')\n"
        "os.kill(w.process.pid, signal.SIGINT)  # a Ctrl-C reaches the whole process group\n"
        "os.kill(w.process.pid, signal.SIGTERM)\n"
        "worker.call(fail_job, mlruns, first, 'KILLED')\n"
        "print(json.dumps({'first': first, 'alive': w.process.poll() is None}))",
    )
    assert got["alive"] is True
    client = _store(tmp_path)
    assert client.get_run(got["first"]).info.status == "KILLED"


def test_a_run_that_ends_before_recording_does_not_wait_for_or_leave_its_worker(tmp_path: Path) -> None:
    got = _script(
        tmp_path,
        "w = worker.start(mlruns)\n"
        "worker.stop()  # what the exit handler does when the run ends before recording\n"
        "late = worker.start(mlruns)\n"
        "print(json.dumps({'exitcode': w.process.returncode, 'pid': late.process.pid}))",  # then exits
    )
    assert got["exitcode"] == -signal.SIGKILL  # not waited for: it was still importing
    assert _gone(got["pid"])  # the exit handler stopped the second one too
    assert not (tmp_path / "mlruns" / "mlflow.db").exists()  # and no store was created


def _hold(lock: Path):  # type: ignore[no-untyped-def]
    import fcntl

    lock.parent.mkdir(parents=True, exist_ok=True)
    fh = open(lock, "a")  # noqa: SIM115 - held across the test
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def test_a_signal_while_waiting_stops_the_worker_and_later_calls_run_in_process(tmp_path: Path) -> None:
    # sweep_parent waits for the sweep's lock, held here: a call that does not finish by itself
    held = _hold(tmp_path / "sweep" / ".lock")
    try:
        got = _script(
            tmp_path,
            "from lmaudit.tracking.sweeps import sweep_parent\n"
            "def ctrl_c(signum, frame):\n"
            "    raise KeyboardInterrupt\n"
            "signal.signal(signal.SIGALRM, ctrl_c)\n"
            "w = worker.start(mlruns)\n"
            "assert w._wait_ready()\n"
            "signal.alarm(2)\n"
            "try:\n"
            "    worker.call(sweep_parent, 'sweep', mlruns, 'e')\n"
            "    interrupted = False\n"
            "except KeyboardInterrupt:\n"
            "    interrupted = True\n"
            "before = 'mlflow' in sys.modules\n"
            "after = worker.call(start_job, mlruns=mlruns, experiment='e', run_name='after')\n"
            "print(json.dumps({'interrupted': interrupted, 'after': after, 'pid': w.process.pid,\n"
            "                  'exitcode': w.process.returncode, 'before': before,\n"
            "                  'after_in_main': 'mlflow' in sys.modules}))",
        )
    finally:
        held.close()
    assert got["interrupted"] is True
    assert got["exitcode"] == -signal.SIGKILL  # the worker was stopped with its call
    assert got["before"] is False and got["after_in_main"] is True  # the next call was made here
    client = _store(tmp_path)
    # the interrupted call stopped where it was: it never created the sweep's parent run
    time.sleep(0.5)
    assert not (tmp_path / "sweep" / "mlflow_parents.json").exists()
    runs = client.search_runs([client.get_experiment_by_name("e").experiment_id])
    assert [r.info.run_id for r in runs] == [got["after"]]


def test_the_worker_does_not_outlive_a_main_process_killed_outright(tmp_path: Path) -> None:
    held = _hold(tmp_path / "sweep" / ".lock")  # the worker's call waits on it until it exits
    code = (
        "import os, signal, sys, threading, time\n"
        "from lmaudit.tracking import worker\n"
        "from lmaudit.tracking.sweeps import sweep_parent\n"
        f"w = worker.start({str(tmp_path / 'mlruns')!r})\n"
        "assert w._wait_ready()\n"
        "print(w.process.pid, flush=True)\n"
        "threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()\n"
        f"worker.call(sweep_parent, 'sweep', {str(tmp_path / 'mlruns')!r}, 'e')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    # the pipe is not read to its end: a worker that outlived the script would hold it open
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        assert proc.wait(timeout=120) == -signal.SIGKILL
        assert _gone(pid)  # while the call it was making still waits
    finally:
        held.close()
        if proc.stdout is not None:
            proc.stdout.close()


def test_the_worker_imports_mlflow_with_the_run_settings_so_telemetry_stays_off(tmp_path: Path) -> None:
    # the worker's own start-up (_serve) in a fresh interpreter; a thread plays the run's side
    code = (
        "import json, os, sys, threading\n"
        "from multiprocessing import Pipe\n"
        "from lmaudit.tracking import worker\n"
        "ours, theirs = Pipe()\n"
        "def run_side():\n"
        "    state = ours.recv()[0]\n"
        "    from mlflow.telemetry.client import get_telemetry_client\n"
        "    print(json.dumps({'state': state, 'client': repr(get_telemetry_client()),\n"
        "                      'env': os.environ.get('MLFLOW_DISABLE_TELEMETRY')}), flush=True)\n"
        "    ours.send(None)\n"
        "threading.Thread(target=run_side).start()\n"
        f"worker._serve(theirs, os.getppid(), {str(tmp_path / 'mlruns')!r}, worker.IMPORTS)\n"
    )
    # MLflow switches telemetry off by itself under pytest or CI: not in the worker of a real run
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTEST_CURRENT_TEST", "CI", "MLFLOW_DISABLE_TELEMETRY")
    }
    env["PYTHONPATH"] = str(REPO / "src")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["state"] == "ready" and got["env"] == "true"
    assert got["client"] == "None"


def test_a_prestarted_worker_takes_its_store_later_in_the_directory_the_run_moved_to(tmp_path: Path) -> None:
    """run.py starts the worker before Hydra (prestart) and gives it the store once the config
    is composed; a relative store path means what it means to the main process then, which may
    have changed directory in between (hydra.job.chdir)."""
    (tmp_path / "moved").mkdir()
    got = _script(
        tmp_path,
        "w = worker.prestart()\n"
        "assert worker.prestart() is w  # once\n"
        "os.chdir('moved')\n"
        "assert worker.start('mlruns') is w\n"
        "run_id = worker.call(start_job, mlruns='mlruns', experiment='e', run_name='r')\n"
        "pid = w.process.pid\n"
        "in_main = 'mlflow' in sys.modules\n"
        "worker.stop()\n"
        "print(json.dumps({'run_id': run_id, 'pid': pid, 'in_main': in_main, 'exitcode': w.process.returncode}))",
    )
    assert got["in_main"] is False and got["exitcode"] == 0
    assert _gone(got["pid"])
    assert not (tmp_path / "mlruns").exists()
    client = _store(tmp_path / "moved")
    assert client.get_run(got["run_id"]).info.run_name == "r"


def test_a_prestarted_worker_the_run_does_not_need_is_stopped_without_a_store(tmp_path: Path) -> None:
    got = _script(
        tmp_path,
        "w = worker.prestart()\n"
        "worker.stop()  # run.py: the composed config does not record (mlflow.enabled=false, ...)\n"
        "print(json.dumps({'exitcode': w.process.returncode, 'in_main': 'mlflow' in sys.modules}))",
    )
    assert got["exitcode"] == -signal.SIGKILL and got["in_main"] is False
    assert not (tmp_path / "mlruns").exists()


def test_a_prestarted_worker_is_replaced_when_the_mlflow_environment_changed(tmp_path: Path) -> None:
    """MLflow reads its MLFLOW_* variables when imported: a worker that imported it before the
    run set one (hydra.job.env_set, ...) is not used; a new one, started with them, is."""
    got = _script(
        tmp_path,
        "early = worker.prestart()\n"
        "os.environ['MLFLOW_LMAUDIT_TEST'] = 'set late'\n"
        "w = worker.start(mlruns)\n"
        "run_id = worker.call(start_job, mlruns=mlruns, experiment='e', run_name='r')\n"
        "print(json.dumps({'replaced': w is not early, 'early_exit': early.process.returncode,\n"
        "                  'early_pid': early.process.pid, 'run_id': run_id,\n"
        "                  'child_env': open(f'/proc/{w.process.pid}/environ').read().count('MLFLOW_LMAUDIT_TEST=set late')}))",
    )
    assert got["replaced"] is True
    assert got["early_exit"] == -signal.SIGKILL and _gone(got["early_pid"])
    assert got["child_env"] == 1
    assert _store(tmp_path).get_run(got["run_id"]).info.status == "RUNNING"
