"""Overrides that make a choir run quick enough for a test: the simulated embedder, and few
shuffles, permutations, bootstrap draws and null draws."""

from __future__ import annotations

QUICK_CHOIR = (
    "study.embedder.kind=sim",
    "study.shuffles=50",
    "study.permutations=50",
    "study.n_boot=50",
    "study.n_null=20",
)
