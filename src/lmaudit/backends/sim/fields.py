"""Checks of sim agents' config fields, with errors naming the agent and the field, and the
hash-seeded generators their fixed draws come from."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

__all__ = ["count", "hashed_rng", "number"]


def number(
    agent: str, name: str, value: Any, lo: float = -math.inf, hi: float = math.inf, *, hi_open: bool = False
) -> float:
    """``value`` as a finite float in ``[lo, hi]`` (``[lo, hi)`` if ``hi_open``; a bool is not a number)."""
    interval = f"[{lo}, {hi})" if hi_open else f"[{lo}, {hi}]"
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ValueError(f"sim agent {agent!r}: field {name!r} must be a number in {interval}, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < lo or x > hi or (hi_open and x >= hi):
        raise ValueError(f"sim agent {agent!r}: field {name!r} must be in {interval}, got {value!r}")
    return x


def count(agent: str, name: str, value: Any, minimum: int = 0) -> int:
    """``value`` as an integer >= ``minimum`` (seeds, signatures, horizons)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < minimum:
        raise ValueError(
            f"sim agent {agent!r}: field {name!r} must be an integer >= {minimum}, got {value!r}"
        )
    return int(value)


def hashed_rng(*parts: Any) -> np.random.Generator:
    """A generator seeded by the SHA-256 of ``"p1:p2:..."``: the same draws in every process."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))
