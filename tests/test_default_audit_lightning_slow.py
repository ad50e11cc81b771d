"""The default audit run by the Lightning runner on 2 CPU processes equals the in-process run
to the byte: measurements.jsonl and results.json are identical files.

Each rank scores whole scoring units, as one process does (the same prefix tries, chunks and
masks), and MKL's strict reproducibility (set by lmaudit) makes a matrix product's bits
independent of the thread count, so the ranks' one-thread arithmetic is the in-process
two-thread arithmetic. Before units, a rank's trie was half the whole one and probabilities
moved by up to 3.7e-6; the thread count alone moved them by up to 4.3e-6.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(tmp: Path, name: str, *overrides: str) -> Path:
    out = tmp / name
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            f"out_dir={out}",
            f"paths.cache={tmp / ('cache-' + name)}",
            "mlflow.enabled=false",
            "progress=false",
            *overrides,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]


def _close(a: Any, b: Any, path: str = "", tol: float = 0.0) -> None:
    """Equal JSON, floats within ``tol``."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}", tol)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]", tol)
    elif isinstance(a, float) and isinstance(b, float):
        assert abs(a - b) <= tol, (path, a, b)
    else:
        assert a == b, (path, a, b)


@pytest.mark.slow
def test_lightning_two_processes_equal_in_process(tmp_path: Path) -> None:
    ref = _run(tmp_path, "inprocess")
    got = _run(tmp_path, "lightning", "model.runner=lightning", "model.devices=2", "model.accelerator=cpu")
    assert (got / "plan.json").read_bytes() == (ref / "plan.json").read_bytes()  # the plan is the same
    rows_got, rows_ref = _rows(got), _rows(ref)
    _close(rows_got, rows_ref, tol=0.0)  # names the first row and field that differ, if any
    assert (got / "measurements.jsonl").read_bytes() == (ref / "measurements.jsonl").read_bytes()
    assert (got / "results.json").read_bytes() == (ref / "results.json").read_bytes()
    audit = json.loads((got / "audit_record.json").read_text())
    assert audit["measure"]["backend"]["runner"]["devices"] == 2
    ident = json.loads((ref / "audit_record.json").read_text())["measure"]["backend_identity"]
    assert audit["measure"]["backend_identity"] == ident
