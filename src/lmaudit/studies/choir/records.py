"""The choir analysis's input records."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["UNCONDITIONED", "ListRecord", "finite"]

UNCONDITIONED = "none"


@dataclass(frozen=True)
class ListRecord:
    model: str
    question: str
    condition: str
    persona: str
    temperature: float
    generation: int
    items: tuple[str, ...]  # concept texts in rank order


def finite(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None
