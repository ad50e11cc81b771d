"""The host a benchmark ran on, as its results record it: timings, and the float bits of the
embedded model's measurements, depend on the CPU's vector extensions (oneMKL and oneDNN choose
their kernels by them), so two results compare only on the same CPU model and flags."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

#: the CPU flags that choose the matmul and vector-math kernels
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16")


def _cpuinfo() -> tuple[str | None, set[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, set()
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, flags


def host() -> dict[str, Any]:
    """Platform, Python, CPU count, CPU model, which :data:`KERNEL_FLAGS` it has, and the
    1-minute load average when the result is written."""
    model, flags = _cpuinfo()
    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "cpu_flags": [f for f in KERNEL_FLAGS if f in flags],
        "load_average_1m": os.getloadavg()[0],
    }
