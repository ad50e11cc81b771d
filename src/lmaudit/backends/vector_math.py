"""MKL's vector math called once on one thread before a model runs (:func:`settle`).

torch computes ``cos``, ``sin``, ``exp``, ``log``, ``tanh`` and a few other functions of a
float tensor with oneMKL's vector math library (``vmsCos``, ``vmdExp``, ...), the tensor split
over torch's OpenMP threads, each calling the library on its share. The first such call in a
process, made by two threads at the same moment, can return another result for one thread's
share than every later call does: the same input, a second call in the same process, gives the
usual values. Measured on the 2-core host, with fresh processes forked from one that had
imported torch, each computing the global rotary table of Gemma 3's first forward twice:

* 1 process in 1,500 had a first ``cos`` that differed from its second in 18,942 of the 37,888
  values, all in one thread's share (``benchmarks/vml_first_call.py`` reproduces this);
* in a full run, the rotary table is the first such call: the scoring unit whose first forward
  it was then moved all its prompts' label probabilities by up to 5.8e-5, while the second
  unit, G1 and G3 were unchanged (two default runs in about a hundred).

:func:`settle` calls each of these functions once on a tensor too small for torch to split
(fewer elements than its 2,048-element grain), so the library's first call is made by one
thread alone, and the later, parallel calls find it set up. It costs well under a millisecond
and is done once per process (again in a forked child, which does not share the parent's
library state with certainty).
"""

from __future__ import annotations

import os

# float functions torch sends to MKL's vector math on the CPU (ATen's cpu/vml.h), and a few
# it computes itself, called too in case another torch build sends them there
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
