"""Everything before the first model call: the QQ study's items and cells (the plain ones and a
mixture's persona cells), the config the plan records and MLflow tracks, the run's name and
the plan (every prompt, with its digest)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from lmaudit.errors import InputError
from lmaudit.provenance.digest import file_sha256
from lmaudit.studies.base import Plan, grouped_config, typed
from lmaudit.studies.qq.config import GROUPS, EstimandConfig, FramingConfig, MappingConfig
from lmaudit.studies.qq.items import Item, load_bank
from lmaudit.studies.qq.mixture.plan import components_of, mixture_plan, persona_cells
from lmaudit.studies.qq.protocol import Cell, build_cells
from lmaudit.studies.qq.selection import select_items

__all__ = [
    "cells_for",
    "default_run_name",
    "load_items",
    "mixture_cells",
    "plan",
    "plan_config",
    "samples",
    "tracked_params",
]

_typed = typed


def samples(est: Mapping[str, Any]) -> bool:
    """Whether an estimand config samples (``sampled``, or a mixture over the sampled base)."""
    mix = est.get("mixture")
    return est.get("kind") == "sampled" or (
        est.get("kind") == "mixture" and isinstance(mix, Mapping) and mix.get("base") == "sampled"
    )


def plan_config(cfg: DictConfig) -> dict[str, Any]:
    """The shared resolved config; ``estimand.mixture`` only where the estimand is a mixture,
    ``estimand.alpha`` only where something is sampled (a log-prob plan has no sampling error)."""
    out = grouped_config(cfg, GROUPS)
    est = out.get("estimand")
    if isinstance(est, dict):
        drop = {"mixture"} if est.get("mixture", 0) is None else set()
        if not samples(est):
            drop.add("alpha")
        out["estimand"] = {k: v for k, v in est.items() if k not in drop}
    return out


def tracked_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """Without the sampling fields where nothing is sampled (``estimand.n``, ``top_p``,
    ``seed``; ``temperature`` too on a log-prob run, which a mixture's tempering reads), and
    without gate G3's settings where G3 is off."""
    out = dict(config)
    est = out.get("estimand")
    if isinstance(est, Mapping):
        drop = set() if samples(est) else {"n", "top_p", "seed"}
        if est.get("kind") == "logprob":
            drop.add("temperature")
        out["estimand"] = {k: v for k, v in est.items() if k not in drop}
    study = out.get("study")
    g3 = (study.get("gates") or {}).get("g3") if isinstance(study, Mapping) else None
    if isinstance(study, Mapping) and isinstance(g3, Mapping) and g3.get("enabled") is False:
        gates = {**study["gates"], "g3": {"enabled": False}}
        out["study"] = {**study, "gates": gates}
    return out


def default_run_name(cfg: DictConfig) -> str:
    """The framing, mapping and estimand, then the model."""
    s = cfg.study
    return f"{s.framing.name}-{s.mapping.name}-{s.estimand.kind}-{cfg.model.name}"


def load_items(cfg: DictConfig) -> list[Item]:
    path = Path(cfg.study["items"].path)
    if not path.exists() and Path("data.dvc").exists() and not Path("data").exists():
        raise InputError(
            f"{path}: the study inputs are not checked out; run `make data` (dvc pull data.dvc) first"
        )
    bank = load_bank(path)
    ids = list(cfg.study["items"].ids) if cfg.study["items"].ids is not None else None
    return select_items(bank, ids, track_p_only=bool(cfg.study.framing.track_p_only))


def cells_for(cfg: DictConfig) -> list[Cell]:
    framing: FramingConfig = _typed(cfg.study.framing, FramingConfig)
    mapping: MappingConfig = _typed(cfg.study.mapping, MappingConfig)
    return build_cells(load_items(cfg), framing, mapping)


def mixture_cells(cfg: DictConfig) -> list[Cell]:
    """``estimand=mixture``: the cells of its personas (the plain cells are :func:`cells_for`'s);
    InputError naming the field for an unknown persona or bad weights, before any model call."""
    est: EstimandConfig = _typed(cfg.study.estimand, EstimandConfig)
    if est.kind != "mixture":
        return []
    assert est.mixture is not None
    if cfg.model.get("backend") != "sim" and any(
        c.weight_ba is not None and c.weight_ba != c.weight for c in est.mixture.components
    ):
        raise InputError(
            "study.estimand.mixture.components: order-dependent weights (weight_ba != weight) are a "
            "check of the sim agents only (Prop. 7's violation channel), not a design for a model"
        )
    framing: FramingConfig = _typed(cfg.study.framing, FramingConfig)
    mapping: MappingConfig = _typed(cfg.study.mapping, MappingConfig)
    return persona_cells(load_items(cfg), framing, mapping, est.mixture, components_of(est.mixture))


def plan(cfg: DictConfig) -> Plan:
    """The resolved plan: config, input digests and every prompt, with its digest."""
    cells = cells_for(cfg)
    resolved = plan_config(cfg)
    items_path = Path(cfg.study["items"].path)
    extra = mixture_cells(cfg)
    body: dict[str, Any] = {
        "study": "qq",
        "config": resolved,
        "inputs": {"items": {"path": str(items_path), "sha256": file_sha256(items_path)}},
        "cells": [
            {
                "item": c.item.id,
                "mapping": c.mapping,
                "order": c.order,
                "label_of": c.label_of,
                "labels": list(c.labels),
                "prompts": [list(r.messages) for r in c.requests],
            }
            for c in cells
        ],
    }
    if cfg.study.estimand.kind == "mixture":
        mix = _typed(cfg.study.estimand, EstimandConfig).mixture
        body["inputs"]["personas"] = {
            "path": str(mix.personas_path),
            "sha256": file_sha256(mix.personas_path),
        }
        body["mixture"] = mixture_plan(mix, components_of(mix), extra)
    return Plan.make(body, 3 * (len(cells) + len(extra)))
