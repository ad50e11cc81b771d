"""Combining a sweep's judge jobs: ``python run.py -m judge/condition=P0,PA,PB,PAB`` judges one
condition per job; comparisons need them together. Jobs that differ in nothing but their
condition set are analysed as one design: their measurement rows are merged (a judgment made
by two jobs must be identical, and is kept once) and analysed with the union of their
conditions, exactly as ``stage=analyze measurements=<merged file>`` would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from lmaudit.provenance.io import InputError, atomic_write_jsonl, iter_jsonl

# keys that name a job rather than define its design
_JOB_KEYS = ("stage", "out_dir", "run_name", "measurements", "prereg")


def _design(cfg: DictConfig) -> dict[str, Any]:
    d: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    for k in _JOB_KEYS:
        d.pop(k, None)
    d["judge"] = {k: v for k, v in d["judge"].items() if k != "condition"}
    return d


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _differences(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    return [] if a == b else [path]


def combine_sweep(cfgs: list[DictConfig], run_dirs: list[Path], out: Path) -> DictConfig:
    """Write the merged measurements under ``out`` and return the config that analyses them.

    Raises InputError naming what keeps the jobs apart (another model, k, rubric, ...)."""
    first = _design(cfgs[0])
    for c in cfgs[1:]:
        diff = _differences(first, _design(c))
        if diff:
            raise InputError(f"the jobs differ in more than their conditions ({', '.join(diff[:5])})")
    specs: dict[str, dict[str, Any]] = {}
    for c in cfgs:
        for spec in OmegaConf.to_container(c.judge.condition.conditions, resolve=True):  # type: ignore[union-attr]
            assert isinstance(spec, dict)
            known = specs.setdefault(str(spec["id"]), spec)
            if {k: v for k, v in known.items() if k != "description"} != {
                k: v for k, v in spec.items() if k != "description"
            }:
                raise InputError(f"condition {spec['id']} is defined differently by two jobs")
    references = {str(c.judge.condition.reference) for c in cfgs}
    if len(references) != 1:
        raise InputError(f"the jobs compare with different reference conditions {sorted(references)}")

    rows: list[dict[str, Any]] = []
    designs: set[str] = set()
    judged: dict[tuple[Any, ...], dict[str, Any]] = {}
    readouts: dict[tuple[Any, ...], dict[str, Any]] = {}
    for d in run_dirs:
        path = d / "measurements.jsonl"
        if not path.exists():
            raise InputError(f"{path}: missing (the job wrote no measurements)")
        for _, r in iter_jsonl(path):
            kind = r.get("kind")
            if kind == "design":
                key = json.dumps({k: v for k, v in r.items() if k != "plan_digest"}, sort_keys=True)
                if key not in designs:
                    designs.add(key)
                    rows.append(r)
                continue
            store: dict[Any, dict[str, Any]]
            key2: tuple[Any, ...]
            if kind == "judgment":
                store, key2 = judged, (r["condition"], r["item"], int(r["replicate"]), int(r["attempt"]))
            else:
                store, key2 = readouts, (r.get("condition"), r.get("item"), r.get("replicate"))
            if key2 in store:
                if store[key2] != r:
                    raise InputError(f"{path}: {kind} {key2} differs from another job's")
                continue
            store[key2] = r
            rows.append(r)
    if len(designs) > 1:
        raise InputError("the jobs' design records differ (isolation, seeds or sampling)")
    merged = out / "measurements.jsonl"
    atomic_write_jsonl(merged, rows)

    reference = references.pop()
    ordered = sorted(specs.values(), key=lambda s: s["id"] != reference)  # the reference first
    cfg = OmegaConf.create(OmegaConf.to_container(cfgs[0], resolve=True))
    assert isinstance(cfg, DictConfig)
    with open_dict(cfg):
        cfg.judge.condition.name = "+".join(str(s["id"]) for s in ordered)
        cfg.judge.condition.conditions = ordered
        cfg.stage = "analyze"
        cfg.measurements = str(merged)
        cfg.out_dir = str(out)
        cfg.run_name = None
        cfg.prereg = None
    return cfg
