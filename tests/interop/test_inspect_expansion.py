"""An inspect_ai ``.eval`` log is a zip archive: what it holds once expanded, not its size on disk,
meets the bound on one input file. The sizes its zip directory declares are checked before any
entry is read (Python's zipfile, which inspect_ai reads with, never expands an entry past them),
so a small archive declaring a 2 GB sample is refused at once, in one line naming the log and the
entry. Real logs, made by inspect_ai in-process with its ``mockllm`` provider."""

from __future__ import annotations

import tracemalloc
import zipfile
from pathlib import Path

import pytest
from draws_interop_helpers import run_inspect

from cli_runs import assert_nothing_half_written, error_line, run_cli
from lmaudit.errors import InputError
from lmaudit.interop import inspect_logs
from lmaudit.provenance import io

pytest.importorskip("inspect_ai")

SEQUENCES = {"q1": ["red", "red", "blue"], "q2": ["blue", "green", "green"]}


def declare(log: Path, entry: str, size: int) -> Path:
    """A copy of ``log`` whose zip directory declares ``entry`` expands to ``size`` bytes (what a
    deflated run of a repeated byte does: kilobytes on disk, gigabytes expanded)."""
    data = bytearray(log.read_bytes())
    at = data.rfind(b"PK\x05\x06")  # end of the central directory: where the directory starts
    i = int.from_bytes(data[at + 16 : at + 20], "little")
    while data[i : i + 4] == b"PK\x01\x02":
        n, m, k = (int.from_bytes(data[i + o : i + o + 2], "little") for o in (28, 30, 32))
        if data[i + 46 : i + 46 + n].decode() == entry:
            assert data[i + 24 : i + 28] != b"\xff\xff\xff\xff"  # a plain (not zip64) size field
            data[i + 24 : i + 28] = size.to_bytes(4, "little")
        i += 46 + n + m + k
    out = log.with_name(f"declared-{log.name}")
    out.write_bytes(bytes(data))
    with zipfile.ZipFile(out) as z:
        assert z.getinfo(entry).file_size == size
    return out


def sample_entry(log: Path) -> str:
    with zipfile.ZipFile(log) as z:
        return next(n for n in z.namelist() if n.startswith("samples/"))


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_inspect(tmp_path_factory.mktemp("logs"), "mockllm/m", SEQUENCES, epochs=3, temperature=1.0)


def test_a_log_that_expands_to_the_bound_is_read_and_one_byte_more_is_refused(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with zipfile.ZipFile(log) as z:
        expanded = sum(i.file_size for i in z.infolist())
    assert log.stat().st_size < expanded  # the archive is smaller than what it holds
    monkeypatch.setattr(io, "MAX_INPUT_BYTES", expanded)
    _, sequences = inspect_logs.read_log(log, log.name)
    assert sorted(s.meta["sample_id"] for s in sequences) == ["q1", "q2"]
    monkeypatch.setattr(io, "MAX_INPUT_BYTES", expanded - 1)
    with pytest.raises(InputError, match=rf"^{log}: its zip entries expand to {expanded:,} bytes \(entry '"):
        inspect_logs.read_log(log, log.name)


def test_a_json_log_past_the_bound_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = run_inspect(tmp_path, "mockllm/m", SEQUENCES, epochs=3, temperature=1.0, log_format="json")
    monkeypatch.setattr(io, "MAX_INPUT_BYTES", log.stat().st_size - 1)
    with pytest.raises(InputError, match=rf"^{log}: larger than {log.stat().st_size - 1:,} bytes"):
        inspect_logs.read_log(log, log.name)


def test_a_small_archive_declaring_a_2_gb_sample_is_refused_before_reading(log: Path) -> None:
    entry = sample_entry(log)
    hostile = declare(log, entry, 2_000_000_000)
    assert hostile.stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as info:
            inspect_logs.read_log(hostile, hostile.name)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert message.startswith(f"{hostile}: its zip entries expand to 2,000,")
    assert f"(entry {entry!r} alone to 2,000,000,000)" in message and "refused before reading" in message
    assert peak < 16 * 2**20  # the zip directory only


def test_a_run_given_that_archive_ends_in_one_line_exit_2(log: Path, tmp_path: Path) -> None:
    hostile = declare(log, sample_entry(log), 2_000_000_000)
    out = tmp_path / "run"
    proc = run_cli(
        "study=draws",
        f"study.import_path={hostile}",
        f"out_dir={out}",
        f"paths.cache={tmp_path / 'cache'}",
        "mlflow.enabled=false",
        "progress=false",
    )
    assert proc.returncode == 2, proc.stderr
    assert error_line(proc).startswith(f"error: {hostile}: its zip entries expand to 2,000,")
    assert_nothing_half_written(out)
