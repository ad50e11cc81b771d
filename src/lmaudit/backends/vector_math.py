"""MKL's vector math called once on one thread before a model runs (:func:`settle`).

torch computes ``cos``, ``sin``, ``exp``, ``log``, ``tanh`` and a few other functions of a
float tensor with oneMKL's vector math library (``vmsCos``, ``vmdExp``, ...), the tensor split
over torch's OpenMP threads, each calling the library on its share. The first such call in a
process, made by two threads at the same moment, can compute one thread's share in the
library's lower-accuracy mode (``VML_EP``, up to 1.5e-4 from the ``VML_HA`` values torch asks
for); every later call is right. Measured with ``benchmarks/vml_first_call.py`` (processes forked
from one that imported torch, each computing a Gemma 3 global rotary table twice on 2 threads,
beside one busy process): 31 of 6,000 first calls differed from the second, and 0 of 6,000 after
:func:`settle`. In a full run the first forward's global rotary table is that first call, and
the first scoring unit's label probabilities all moved, by up to 5.8e-5 (two default runs in
about a hundred).

:func:`settle` calls each of these functions once on a tensor too small for torch to split
(fewer elements than its 2,048-element grain), so the library's first call is made by one
thread alone. It costs about 2 ms (most of it the library setting itself up), changes no
value, and is done once per process (again in a forked child, which may not share the
parent's library state).

This works around PyTorch issue #188792 (https://github.com/pytorch/pytorch/issues/188792:
oneMKL resolves each VML function's kernel on its first call, and concurrent first calls race).
torch 2.13.0's CPU wheel links oneMKL 2024.2 (``torch.__config__.show()``), an affected version.
**When it can go:** once the torch that lmaudit installs links oneMKL 2025.0 or newer, where the
race no longer reproduces, or carries the one-element warm-up of PyTorch PR #188791; check with
``benchmarks/vml_first_call.py`` (0 first calls differing without :func:`settle`).
"""

from __future__ import annotations

import os

# The float functions torch 2.13's CPU build sends to MKL's vector math (ATen's cpu/vml.h;
# breakpoints on vms* show acos, asin, atan, cos, erf, erfc, erfinv, exp, log, log2, log10, sin,
# sqrt, tan, tanh and trunc), and five it computes itself (expm1, log1p, rsqrt, sigmoid, abs),
# called too in case another build sends them there.
_FUNCTIONS = (
    "cos", "sin", "tan", "acos", "asin", "atan", "exp", "expm1", "log", "log2", "log10",
    "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "erfc", "erfinv", "trunc", "abs",
)  # fmt: skip

_settled_pid: int | None = None


def settle() -> None:
    """Make the first call of each vector-math function on this thread alone (once per process)."""
    global _settled_pid
    if _settled_pid == os.getpid():
        return
    import torch

    for dtype in (torch.float32, torch.float64):
        x = torch.linspace(0.05, 0.95, 16, dtype=dtype)  # inside every function's domain
        for name in _FUNCTIONS:
            getattr(torch, name)(x)
    _settled_pid = os.getpid()


def is_settled() -> bool:
    return _settled_pid == os.getpid()
