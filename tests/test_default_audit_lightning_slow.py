"""The default audit run by the Lightning runner on 2 CPU processes equals the in-process run.

Every discrete outcome (verdicts, counts, gates, G1 pieces, G3 draws) is identical. On the
embedded Gemma 3 270M a rank's prefix trie is half the whole one, so its packed chunks differ and
label probabilities move by floating-point reassociation: at most 3.7e-6 here (the packed engine
itself differs from a per-prompt forward by up to 7.5e-6); the fitted discriminant parameters,
which amplify them, by at most 4.5e-5. The tiny-model test holds 1e-6
(tests/backends/test_lightning_runner.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
TOL = 1e-5  # label probabilities and what is derived from them
TOL_FITS = 1e-4  # least-squares fits


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


def _close(a: Any, b: Any, path: str = "", tol: float = TOL) -> None:
    """Equal JSON, floats within ``tol``."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}", TOL_FITS if k == "fits" else tol)
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
    _close(_rows(got), _rows(ref))  # label probabilities within TOL, G1 and G3 rows identical
    a, b = (json.loads((p / "results.json").read_text()) for p in (got, ref))
    a.pop("source")  # the digest of measurements.jsonl, whose floats differ in the last digits
    b.pop("source")
    _close(a, b)
    audit = json.loads((got / "audit_record.json").read_text())
    assert audit["measure"]["backend"]["runner"]["devices"] == 2
    ident = json.loads((ref / "audit_record.json").read_text())["measure"]["backend_identity"]
    assert audit["measure"]["backend_identity"] == ident
