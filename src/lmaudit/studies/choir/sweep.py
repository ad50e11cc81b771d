"""Combining a sweep's choir jobs: ``python run.py -m study=choir ensemble=a,b`` (or jobs over
different models) elicit parts of one design; jobs whose designs agree in everything but their
members and the run's model (:func:`design_key`) are analysed together. Their measurement rows
are merged: a list two jobs both hold must be identical and is kept once, an embedding must be
the same vector under the same embedder, and the vocabularies must agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from lmaudit.config.execution import EMBEDDER_EXECUTION_FIELDS, without_execution
from lmaudit.errors import InputError
from lmaudit.provenance.io import atomic_write_jsonl, iter_jsonl

_JOB_KEYS = ("stage", "out_dir", "run_name", "measurements", "prereg", "model")


def design_key(cfg: DictConfig) -> str:
    d: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    for k in _JOB_KEYS:
        d.pop(k, None)
    d["study"] = {k: v for k, v in (d.get("study") or {}).items() if k != "ensemble"}
    d["study"]["embedder"] = without_execution(d["study"].get("embedder"), EMBEDDER_EXECUTION_FIELDS)
    return json.dumps(d, sort_keys=True, default=str)


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    kind = r.get("kind")
    if kind == "list":
        return (kind, r["model"], r["question"], r["condition"], r["temperature"], r["generation"])
    if kind == "embedding":
        return (kind, r["text"])
    if kind in ("vocabulary",):
        return (kind, r["question"])
    if kind == "profile_vocabulary":
        return (kind, r["persona"])
    if kind == "embedder":
        return (kind,)
    return (kind, json.dumps(r, sort_keys=True))


def combine_sweep(cfgs: list[DictConfig], run_dirs: list[Path], out: Path) -> DictConfig:
    if len({design_key(c) for c in cfgs}) != 1:
        raise InputError("the jobs differ in more than their members")
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c, d in zip(cfgs, run_dirs, strict=True):
        path = Path(c.measurements) if c.get("measurements") else d / "measurements.jsonl"
        if not path.exists():
            raise InputError(f"{path}: missing (the job wrote no measurements)")
        for _, r in iter_jsonl(path):
            k = _key(r)
            if k in seen and seen[k] != r:
                raise InputError(f"{path}: {k[0]} {k[1:]} differs from another job's")
            seen.setdefault(k, r)
    merged = out / "measurements.jsonl"
    atomic_write_jsonl(merged, list(seen.values()))
    cfg = OmegaConf.create(OmegaConf.to_container(cfgs[0], resolve=True))
    assert isinstance(cfg, DictConfig)
    members = sorted({str(r["model"]) for k, r in seen.items() if k[0] == "list"})
    with open_dict(cfg):
        cfg.study.ensemble.name = "+".join(str(c.study.ensemble.name) for c in cfgs)
        cfg.stage = "analyze"
        cfg.measurements = str(merged)
        cfg.out_dir = str(out)
        cfg.run_name = None
        cfg.prereg = None
    print(f"sweep: choir members analysed together: {', '.join(members)}")
    return cfg
