"""Checks of sim agents' config fields, with errors naming the agent and the field."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["count", "number"]


def number(agent: str, name: str, value: Any, lo: float = -math.inf, hi: float = math.inf) -> float:
    """``value`` as a float in ``[lo, hi]`` (a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= float(value) <= hi:
        raise ValueError(
            f"sim agent {agent!r}: field {name!r} must be a number in [{lo}, {hi}], got {value!r}"
        )
    return float(value)


def count(agent: str, name: str, value: Any) -> int:
    """``value`` as an integer >= 0 (seeds, signatures)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"sim agent {agent!r}: field {name!r} must be an integer >= 0, got {value!r}")
    return int(value)
