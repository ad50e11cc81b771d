"""Environments under which a subprocess computes with other kernels than this one: NumPy's
dispatch with its widest SIMD level turned off (an AVX2 host's kernels on an AVX-512 host, a
baseline host's on an AVX2 one), OpenBLAS's Haswell kernel, one thread."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np


def narrower_numpy() -> dict[str, str] | None:
    """``NPY_DISABLE_CPU_FEATURES`` turning off the widest SIMD level NumPy found on this
    machine (AVX-512, else AVX2), or None when it found nothing beyond its baseline."""
    found = list(np.show_config(mode="dicts")["SIMD Extensions"]["found"])  # type: ignore[index]
    wide = [f for f in found if f.startswith("AVX512") or f == "X86_V4"]
    if not wide:
        wide = [f for f in found if f in ("X86_V3", "AVX2", "FMA3", "AVX", "F16C")]
    return {"NPY_DISABLE_CPU_FEATURES": ",".join(wide)} if wide else None


def other_kernels() -> dict[str, str]:
    """Every switch at once: narrower NumPy, OpenBLAS's Haswell kernel, one thread."""
    return {
        **(narrower_numpy() or {}),
        "OPENBLAS_CORETYPE": "Haswell",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def run_python(code: str, env: dict[str, str] | None = None) -> str:
    """``code``'s standard output, run by this Python in a subprocess with ``env`` added."""
    full = {**os.environ, **(env or {})}
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, check=True)
    return out.stdout
