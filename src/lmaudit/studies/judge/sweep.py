"""Combining a sweep's judge jobs: ``python run.py -m judge/condition=P0,PA,PB,PAB`` judges one
condition per job; comparisons need them together. Jobs whose designs agree in everything but
their condition set (``design_key``) are analysed as one design: their measurement rows are
merged (a judgment made by two jobs must be identical, and is kept once) and analysed with the
union of their conditions, exactly as ``stage=analyze measurements=<merged file>`` would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from lmaudit.errors import InputError
from lmaudit.provenance.io import atomic_write_jsonl, iter_jsonl

# keys that name a job rather than define its design
_JOB_KEYS = ("stage", "out_dir", "run_name", "measurements", "prereg")
# design-row fields that differ from job to job without the designs differing
_PER_JOB = ("plan_digest", "files", "readout")


def _design(cfg: DictConfig) -> dict[str, Any]:
    d: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    for k in _JOB_KEYS:
        d.pop(k, None)
    d["study"] = {k: v for k, v in (d.get("study") or {}).items() if k != "condition"}
    return d


def design_key(cfg: DictConfig) -> str:
    """Jobs with equal keys differ at most in their condition sets (and how they are named)."""
    return json.dumps(_design(cfg), sort_keys=True, default=str)


def _measurements(cfg: DictConfig, run_dir: Path) -> Path:
    return Path(cfg.measurements) if cfg.get("measurements") else run_dir / "measurements.jsonl"


def _merge_designs(designs: list[dict[str, Any]]) -> dict[str, Any]:
    """One design row for the merged file: the shared fields, the per-job ones collected."""
    shared = [{k: v for k, v in d.items() if k not in _PER_JOB} for d in designs]
    for d in shared[1:]:
        diff = sorted(k for k in set(d) | set(shared[0]) if d.get(k) != shared[0].get(k))
        if diff:
            raise InputError(f"the jobs' design records differ in {', '.join(diff)}")
    out = dict(shared[0])
    digests = [d["plan_digest"] for d in designs if d.get("plan_digest")]
    if digests:
        out["plan_digest"] = None  # no single plan: each job's is listed
        out["job_plan_digests"] = digests
    files = {cid: f for d in designs for cid, f in (d.get("files") or {}).items()}
    if files:
        out["files"] = files
    notes = list(dict.fromkeys(str(d["readout"]) for d in designs if d.get("readout") is not None))
    if notes:
        out["readout"] = notes[0] if len(notes) == 1 else "; ".join(notes)
    return out


def combine_sweep(cfgs: list[DictConfig], run_dirs: list[Path], out: Path) -> DictConfig:
    """Write the merged measurements under ``out`` and return the config that analyses them.

    ``cfgs`` share one :func:`design_key`. Raises InputError saying what keeps the jobs apart."""
    keys = {design_key(c) for c in cfgs}
    if len(keys) != 1:
        raise InputError("the jobs differ in more than their conditions")
    if str(cfgs[0].study.get("isolation")) == "shared":
        raise InputError(
            "shared-context jobs are not combined: each job's conversation held only its own "
            "conditions, so the merged design would not be the shared-context design"
        )
    sources = [_measurements(c, d) for c, d in zip(cfgs, run_dirs, strict=True)]
    if len({p.resolve() for p in sources}) != len(sources):
        raise InputError("two jobs wrote the same measurement file (a fixed out_dir= or run_name=)")
    specs: dict[str, dict[str, Any]] = {}
    for c in cfgs:
        for spec in OmegaConf.to_container(c.study.condition.conditions, resolve=True):  # type: ignore[union-attr]
            assert isinstance(spec, dict)
            known = specs.setdefault(str(spec["id"]), spec)
            if {k: v for k, v in known.items() if k != "description"} != {
                k: v for k, v in spec.items() if k != "description"
            }:
                raise InputError(f"condition {spec['id']} is defined differently by two jobs")
    references = {str(c.study.condition.reference) for c in cfgs}
    if len(references) != 1:
        raise InputError(f"the jobs compare with different reference conditions {sorted(references)}")

    designs: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for path in sources:
        if not path.exists():
            raise InputError(f"{path}: missing (the job wrote no measurements)")
        for _, r in iter_jsonl(path):
            kind = r.get("kind")
            if kind == "design":
                designs.append(r)
                continue
            if kind == "judgment":
                key: tuple[Any, ...] = (
                    kind,
                    r["condition"],
                    r["item"],
                    int(r["replicate"]),
                    int(r["attempt"]),
                )
            else:
                key = (kind, r.get("condition"), r.get("item"), r.get("replicate"))
            if key in seen:
                if seen[key] != r:
                    raise InputError(f"{path}: {kind} {key[1:]} differs from another job's")
                continue
            seen[key] = r
            rows.append(r)
    if not designs:
        raise InputError("the jobs' measurement files hold no design record")
    merged = out / "measurements.jsonl"
    atomic_write_jsonl(merged, [_merge_designs(designs), *rows])

    reference = references.pop()
    ordered = sorted(specs.values(), key=lambda s: s["id"] != reference)  # the reference first
    cfg = OmegaConf.create(OmegaConf.to_container(cfgs[0], resolve=True))
    assert isinstance(cfg, DictConfig)
    with open_dict(cfg):
        cfg.study.condition.name = "+".join(str(s["id"]) for s in ordered)
        cfg.study.condition.conditions = ordered
        cfg.stage = "analyze"
        cfg.measurements = str(merged)
        cfg.out_dir = str(out)
        cfg.run_name = None
        cfg.prereg = None
    return cfg
