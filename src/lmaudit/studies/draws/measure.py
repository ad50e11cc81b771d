"""Measuring the draws design: every request's draws sampled through the cache (draw order
kept and normalised to categories), or the import's sequences; another tool's log becomes
sequence rows and ``log_audit`` rows (:mod:`.foreign`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.errors import InputError
from lmaudit.interop.detect import detect
from lmaudit.studies.base import Measured, Plan
from lmaudit.studies.draws.foreign import foreign_rows
from lmaudit.studies.draws.importer import ImportRows, read_import
from lmaudit.studies.draws.planning import normaliser, sampling_requests, settings

__all__ = ["measure", "sequence_rows"]


def sequence_rows(cfg: DictConfig, cached: CachedBackend | None) -> list[dict[str, Any]] | ImportRows:
    """Sequence rows: sampled through the cache (draw order kept), or the import file's,
    validated whole and then read again one at a time as they are written; another tool's log
    becomes sequence rows and ``log_audit`` rows (:mod:`.foreign`)."""
    s = settings(cfg)
    if s.import_path:
        found = detect(s.import_path, s.import_format)
        if found.format == "lmaudit":
            return read_import(s.import_path)
        return foreign_rows(found, normaliser(s), dataclasses.asdict(s.normalise))
    if cached is None:
        raise InputError("study draws: sampling needs a backend (study.import_path is not set)")
    norm = normaliser(s)
    requests = sampling_requests(cfg, s)
    results = cached.sample(requests, desc="draws")
    rows = []
    for req, res in zip(requests, results, strict=True):
        row = {
            "kind": "refused" if res.refused else "sequence",
            "family": str(cfg.model.name),
            "source": s.source,
            "condition": req.meta["condition"],
            "probe": req.meta["probe"],
            "replicate": req.meta["replicate"],
            "seed": req.seed,
        }
        if res.refused:  # a sequence with a refused draw has no draw-to-draw order to test
            rows.append({**row, "refusals": list(res.refusals), "raw": list(res.texts)})
        else:
            rows.append({**row, "draws": [norm(t) for t in res.texts], "raw": list(res.texts)})
    return rows


def measure(cfg: DictConfig, plan: Plan, cached: CachedBackend | None) -> Measured:
    """The sequence rows (:func:`sequence_rows`), with the import's format for the audit record."""
    rows = sequence_rows(cfg, cached)
    fmt = (plan.inputs.get("import") or {}).get("format")
    return Measured(rows, audit={"import_format": fmt} if fmt else {})
