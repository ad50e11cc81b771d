"""A run killed at any point and started again reuses what was measured and ends with results
identical to an uninterrupted run; no file is ever left half-written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _cmd(tmp: Path, name: str, cache: Path) -> list[str]:
    return [
        sys.executable,
        str(REPO / "run.py"),
        "model=sim_mixture",
        "mlflow.enabled=false",
        "progress=false",
        f"out_dir={tmp / name}",
        f"paths.cache={cache}",
        f"items.path={REPO / 'data/qq/items/pilot.json'}",
    ]


def _entries(cache: Path) -> int:
    """Answers in the cache: one per-key file each, or one line each of a pack (a request's draws)."""
    if not cache.exists():
        return 0
    packs = sum(len(p.read_bytes().splitlines()) for p in cache.glob("packs/*.jsonl"))
    return sum(1 for _ in cache.rglob("*.json")) + packs


@pytest.mark.parametrize("kill_after", [40, 150, 400])
def test_killed_run_resumes_to_identical_results(tmp_path, kill_after):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    ref = subprocess.run(
        _cmd(tmp_path, "ref", tmp_path / "cache_ref"),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ref.returncode == 0, ref.stderr[-2000:]
    total = _entries(tmp_path / "cache_ref")
    assert total > kill_after

    cache = tmp_path / "cache"
    proc = subprocess.Popen(
        _cmd(tmp_path, "run", cache), cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300
    while _entries(cache) < kill_after and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    done = _entries(cache)
    assert kill_after <= done < total
    out = tmp_path / "run"
    # nothing half-written: results do not exist yet, every cache entry parses completely
    assert not (out / "results.json").exists()
    for p in cache.rglob("*.json"):
        json.loads(p.read_text())
    for p in cache.glob("packs/*.jsonl"):
        for line in p.read_text().splitlines():
            json.loads(line)

    again = subprocess.run(
        _cmd(tmp_path, "run", cache), cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert (out / "results.json").read_bytes() == (tmp_path / "ref" / "results.json").read_bytes()
    assert (out / "measurements.jsonl").read_bytes() == (tmp_path / "ref" / "measurements.jsonl").read_bytes()
    stats = json.loads((out / "audit_record.json").read_text())["measure"]["cache"]
    assert stats["hits"] >= done - 50  # what was measured before the kill was reused
    # temporary files of a killed writer are never taken for entries
    for p in cache.rglob("*.tmp"):
        assert p.name.startswith(".")
