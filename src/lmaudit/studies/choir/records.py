"""The choir analysis's input records."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    concepts: tuple[str, ...] | None = None  # hand-coded: each item's concept id (no clustering)

    @classmethod
    def from_row(cls, r: Mapping[str, Any]) -> ListRecord:
        """A list row of measurements.jsonl (KeyError, TypeError or ValueError when malformed)."""
        return cls(
            str(r["model"]),
            str(r["question"]),
            str(r["condition"]),
            str(r["persona"]),
            float(r["temperature"]),
            int(r["generation"]),
            tuple(str(it["text"]) for it in r["items"]),
            tuple(str(it["concept"]) for it in r["items"]) if r.get("coded") else None,
        )


def finite(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None
