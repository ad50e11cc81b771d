"""The default audit run by the Lightning runner on 2 CPU processes, against the in-process run
(the determinism contract, docs/architecture.md):

* computed fresh, its label probabilities agree with the in-process ones within 1e-5 (each rank
  scores whole scoring units as one process does, at its own thread count);
* computed from the in-process run's response cache, its measurements and results are the
  in-process run's, byte for byte: the cache, not the arithmetic, is what reproduces a run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(tmp: Path, name: str, *overrides: str, cache: str | None = None) -> Path:
    """``run.py`` with its outputs in ``tmp/name`` and its response cache in ``tmp/cache-<cache or name>``."""
    out = tmp / name
    proc = subprocess.run(
        [
            sys.executable,
            "run.py",
            f"out_dir={out}",
            f"paths.cache={tmp / ('cache-' + (cache or name))}",
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


LIGHTNING = ("model.runner=lightning", "model.devices=2", "model.accelerator=cpu")


@pytest.mark.slow
def test_lightning_two_processes_agree_with_in_process(tmp_path: Path) -> None:
    ref = _run(tmp_path, "inprocess")
    got = _run(tmp_path, "lightning", *LIGHTNING)
    assert (got / "plan.json").read_bytes() == (ref / "plan.json").read_bytes()  # the plan is the same
    _close(_rows(got), _rows(ref), tol=1e-5)  # names the first row and field that differ, if any
    audit = json.loads((got / "audit_record.json").read_text())
    assert audit["measure"]["backend"]["runner"]["devices"] == 2
    ident = json.loads((ref / "audit_record.json").read_text())["measure"]["backend_identity"]
    assert audit["measure"]["backend_identity"] == ident
    # the same run on the Lightning runner, served from the in-process run's cache
    shared = _run(tmp_path, "shared", *LIGHTNING, cache="inprocess")
    assert (shared / "measurements.jsonl").read_bytes() == (ref / "measurements.jsonl").read_bytes()
    assert (shared / "results.json").read_bytes() == (ref / "results.json").read_bytes()
