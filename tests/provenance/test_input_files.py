"""Input files are regular files, read with a size bound: a named pipe is refused before its
open could block, a device (/dev/zero) before it is read, a file past MAX_INPUT_BYTES before it
fills memory. Each reader of user input goes through lmaudit.provenance.io.open_input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_runs import run_cli
from lmaudit.errors import InputError
from lmaudit.provenance import io
from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import iter_jsonl, read_json, read_utf8
from lmaudit.studies.qq.items import load_bank

READERS = {
    "read_json": "from lmaudit.provenance.io import read_json as f",
    "read_utf8": "from lmaudit.provenance.io import read_utf8 as f",
    "iter_jsonl": "from lmaudit.provenance.io import iter_jsonl\nf = lambda p: list(iter_jsonl(p))",
    "file_sha256": "from lmaudit.provenance.digest import file_sha256 as f",
    "load_bank": "from lmaudit.studies.qq.items import load_bank as f",
}


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "items.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_named_pipe_is_refused_without_blocking(fifo: Path, reader: str) -> None:
    # in a process of its own: a reader that opens the pipe blocks there for good (no writer)
    code = (
        f"{READERS[reader]}\nimport sys\nfrom lmaudit.errors import InputError\n"
        "try:\n    f(sys.argv[1])\nexcept InputError as e:\n    print(e)\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{reader} blocked on a named pipe")
    assert proc.returncode == 0, proc.stderr
    # the line itself (load_bank lists it under the bank's header)
    assert proc.stdout.strip().splitlines()[-1].strip() == (
        f"{fifo}: a named pipe (FIFO), not a regular file; inputs are read from regular files only"
    )


@pytest.mark.parametrize("reader", [read_json, read_utf8, file_sha256, lambda p: list(iter_jsonl(p))])
def test_a_device_or_folder_is_refused_before_reading(tmp_path: Path, reader) -> None:
    with pytest.raises(InputError, match=r"^/dev/zero: a character device, not a regular file"):
        reader("/dev/zero")
    with pytest.raises(InputError, match=rf"^{tmp_path}: a folder, not a regular file"):
        reader(tmp_path)
    with pytest.raises(InputError, match="file not found"):
        reader(tmp_path / "missing.json")


def test_an_item_bank_on_a_device_is_an_item_bank_error_naming_it() -> None:
    with pytest.raises(InputError, match=r"\n  /dev/zero: a character device, not a regular file") as e:
        load_bank("/dev/zero")
    assert type(e.value).__name__ == "ItemBankError"


def test_files_past_the_bound_are_refused_and_files_at_it_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(io, "MAX_INPUT_BYTES", 64)
    at = tmp_path / "at.json"
    at.write_text(json.dumps({"k": "x" * 55}))  # 64 bytes
    assert at.stat().st_size == 64 and read_json(at) == {"k": "x" * 55}
    over = tmp_path / "over.json"
    over.write_text(json.dumps({"k": "x" * 56}))  # 65 bytes
    with pytest.raises(InputError, match=rf"^{over}: larger than 64 bytes"):
        read_json(over)
    with pytest.raises(InputError, match=rf"\n  {over}: larger than 64 bytes"):
        load_bank(over)
    # JSON Lines stream: the file may be long, a line may not
    lines = tmp_path / "rows.jsonl"
    short = json.dumps({"k": "x" * 40})
    lines.write_text(f"{short}\n{short}\n{short}\n")  # 150 bytes, every line under 64
    assert [n for n, _ in iter_jsonl(lines)] == [1, 2, 3]
    lines.write_text(f"{short}\n{json.dumps({'k': 'x' * 70})}\n")
    with pytest.raises(InputError, match=rf"^{lines}: line 2: longer than 64 bytes"):
        list(iter_jsonl(lines))


def test_a_run_given_a_named_pipe_for_its_items_fails_at_once_naming_it(fifo: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    try:
        proc = run_cli(
            "model=sim_projective",
            f"items.path={fifo}",
            f"out_dir={out}",
            f"paths.cache={tmp_path / 'cache'}",
            "mlflow.enabled=false",
            "progress=false",
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the run blocked on the named pipe")
    assert proc.returncode != 0
    assert f"{fifo}: a named pipe (FIFO), not a regular file" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() or not any(out.iterdir())  # nothing written
