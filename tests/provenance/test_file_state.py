"""Remembered file digests (as DVC's state): a file's SHA-256 is computed once per version of the
file (inode, size, mtime_ns) and reused while those hold; a file written just now, or a damaged
state, is hashed again."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from lmaudit.provenance.file_state import RACY_SECONDS, file_digests

OLD_NS = 1_600_000_000 * 10**9  # an mtime far in the past (not "racy")


def _file(path: Path, data: bytes, mtime_ns: int = OLD_NS) -> Path:
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def test_digests_are_sha256_of_the_content(tmp_path: Path) -> None:
    a = _file(tmp_path / "a.bin", b"weights" * 1000)
    b = _file(tmp_path / "b.json", b"{}")
    got = file_digests([a, b], tmp_path / "state.json")
    assert got == {a: hashlib.sha256(a.read_bytes()).hexdigest(), b: hashlib.sha256(b"{}").hexdigest()}


def test_an_unchanged_file_is_not_read_again(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    f = _file(tmp_path / "model.safetensors", b"A" * 4096)
    first = file_digests([f], state)[f]
    # other bytes under the same inode, size and mtime: the remembered digest is served, which
    # shows the file was not read (and is why a changed file must change its stamp)
    with f.open("r+b") as fh:
        fh.write(b"B" * 4096)
    os.utime(f, ns=(OLD_NS, OLD_NS))
    assert file_digests([f], state)[f] == first
    os.utime(f, ns=(OLD_NS + 1, OLD_NS + 1))  # a write moves the mtime: hashed again
    assert file_digests([f], state)[f] == hashlib.sha256(b"B" * 4096).hexdigest()


def test_a_file_written_just_now_is_not_remembered(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    now = time.time_ns()
    f = _file(tmp_path / "fresh.bin", b"x", now)
    assert time.time() - f.stat().st_mtime < RACY_SECONDS
    assert file_digests([f], state)[f] == hashlib.sha256(b"x").hexdigest()
    assert not state.exists()  # a second write in the same clock tick could keep this mtime


@pytest.mark.parametrize("damage", ["not json", "[1, 2]", '{"%s": {"stamp": "x", "sha256": 3}}'])
def test_a_damaged_state_is_computed_again(tmp_path: Path, damage: str) -> None:
    state = tmp_path / "state.json"
    f = _file(tmp_path / "w.bin", b"abc")
    state.write_text(damage.replace("%s", str(f.resolve())))
    assert file_digests([f], state)[f] == hashlib.sha256(b"abc").hexdigest()
    entry = json.loads(state.read_text())[str(f.resolve())]
    assert entry["sha256"] == hashlib.sha256(b"abc").hexdigest()


def test_files_that_are_gone_are_forgotten(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    a, b = _file(tmp_path / "a", b"1"), _file(tmp_path / "b", b"2")
    file_digests([a], state)
    a.unlink()
    file_digests([b], state)
    assert list(json.loads(state.read_text())) == [str(b.resolve())]
