"""Overrides that make a choir run quick enough for a test: the simulated embedder, and few
shuffles, permutations, bootstrap draws and null draws; and the check that a run's
results.json is the study's typed results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

QUICK_CHOIR = (
    "study.embedder.kind=sim",
    "study.shuffles=50",
    "study.permutations=50",
    "study.n_boot=50",
    "study.n_null=20",
)


def typed_results(path: Path) -> dict[str, Any]:
    """A run's results.json, checked to be the choir study's typed results byte for byte (read
    back by :class:`ChoirResults`, written again); the parsed body."""
    from lmaudit.provenance.digest import canonical_json
    from lmaudit.studies.choir.results import ChoirResults

    doc = json.loads(path.read_text(encoding="utf-8"))
    assert canonical_json(ChoirResults.from_json(doc, str(path)).to_json()) == canonical_json(doc)
    return dict(doc)
