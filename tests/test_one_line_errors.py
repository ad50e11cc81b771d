"""What the machine or a server refuses is reported in one line naming the path or the server,
with no traceback: a folder path that is a file, a file-size limit while writing, a server that
cannot be reached."""

from __future__ import annotations

import resource
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from cli_runs import error_line, run_cli


def _run(*overrides: str, limit_bytes: int | None = None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:  # the kernel's answer to a write past the limit: EFBIG, not SIGXFSZ
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        assert limit_bytes is not None
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return run_cli(
        "model=sim_projective",
        "mlflow.enabled=false",
        "progress=false",
        *overrides,
        preexec_fn=limited if limit_bytes is not None else None,
    )


@pytest.mark.parametrize(
    ("field", "target", "said"),
    [
        ("out_dir", "afile", "out_dir = {p} is a file, not a folder"),
        ("out_dir", "afile/run", "out_dir = {p} lies below {f}, a file, not a folder"),
        ("paths.cache", "afile", "paths.cache = {p} is a file, not a folder"),
        ("paths.cache", "afile/cache", "paths.cache = {p} lies below {f}, a file, not a folder"),
    ],
)
def test_a_folder_path_that_is_a_file_is_refused_before_anything_is_written(
    tmp_path: Path, field: str, target: str, said: str
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("the user's own file\n")
    p = tmp_path / target
    defaults = {"out_dir": tmp_path / "run", "paths.cache": tmp_path / "cache"}
    proc = _run(*(f"{k}={p if k == field else v}" for k, v in defaults.items()))
    assert proc.returncode == 2
    assert error_line(proc) == "error: " + said.format(p=p, f=afile)
    assert afile.read_text() == "the user's own file\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["afile"]  # no run folder, no cache


def test_a_write_past_the_file_size_limit_names_the_file(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _run(f"out_dir={out}", f"paths.cache={tmp_path / 'cache'}", limit_bytes=20_000)
    assert proc.returncode == 1
    line = error_line(proc)
    assert line.startswith(f"error: {out}/") and line.endswith(": File too large"), line
    # the file that could not be written is not left half-written: nothing of it is there
    assert not Path(line.removeprefix("error: ").rsplit(": ", 1)[0]).exists()


def test_a_server_that_cannot_be_reached_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port bound and released: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _run(
        "model=openai",
        f"model.base_url=http://127.0.0.1:{port}/v1",
        "model.model=toy",
        f"out_dir={tmp_path / 'run'}",
        f"paths.cache={tmp_path / 'cache'}",
    )
    assert proc.returncode == 1
    assert error_line(proc).startswith(f"error: cannot reach http://127.0.0.1:{port}/v1")
