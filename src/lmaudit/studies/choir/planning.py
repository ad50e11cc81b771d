"""Everything before the first model call: the choir study's settings, its ensemble and
evaluators, the run's name and the plan (the design's requests of every member, or the
import's digests). The design itself (questions, conditions, requests) is :mod:`.design`."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmaudit.config.execution import EMBEDDER_EXECUTION_FIELDS, without_execution
from lmaudit.errors import InputError
from lmaudit.interop.audit import plan_inputs
from lmaudit.provenance.digest import file_sha256
from lmaudit.studies.base import Plan, grouped_config, typed
from lmaudit.studies.choir import design
from lmaudit.studies.choir.config import GROUPS, ChoirStudyConfig
from lmaudit.studies.choir.foreign import log_import
from lmaudit.studies.choir.ranking import evaluators, ranking_mode

__all__ = ["default_run_name", "ensemble", "evaluator_models", "plan", "plan_config", "settings"]


def settings(cfg: DictConfig) -> ChoirStudyConfig:
    s = typed(cfg.study, ChoirStudyConfig)
    assert isinstance(s, ChoirStudyConfig)
    return s


def ensemble(cfg: DictConfig, s: ChoirStudyConfig) -> list[dict[str, Any]]:
    members = OmegaConf.to_container(cfg.study.ensemble.members, resolve=True)
    if not members:
        model = OmegaConf.to_container(cfg.model, resolve=True)
        assert isinstance(model, dict)
        return [{str(k): v for k, v in model.items()}]
    assert isinstance(members, list)
    out = []
    for i, m in enumerate(members):
        if not isinstance(m, dict) or "backend" not in m:
            raise InputError(
                f"study: field 'ensemble.members[{i}]' must be a model config with 'backend' and 'name'"
            )
        design.member_name(m, i)
        out.append(m)
    names = [m["name"] for m in out]
    if len(set(names)) != len(names):
        raise InputError(f"study: field 'ensemble.members': member names must be distinct, got {names}")
    return out


def evaluator_models(cfg: DictConfig, s: ChoirStudyConfig) -> list[dict[str, Any]]:
    return evaluators(OmegaConf.to_container(cfg.study.ensemble.evaluators, resolve=True), ensemble(cfg, s))


def default_run_name(cfg: DictConfig) -> str:
    """What varies between choir runs first: the bank, the ensemble and its members (a digest
    for a long one), the generations; an import by its file."""
    s = settings(cfg)
    if s.import_path:
        return f"import-{Path(s.import_path).stem}"
    members = [str(m["name"]) for m in ensemble(cfg, s)]
    names = "+".join(members)
    if len(names) > 48:  # a long ensemble: its first member, its size, a digest of all names
        tag = hashlib.sha256(names.encode()).hexdigest()[:6]
        names = f"{members[0]}+{len(members) - 1}more-{tag}"
    return f"{s.bank}-{s.ensemble.name}-{names}-g{s.generations}"


def plan_config(cfg: DictConfig) -> dict[str, Any]:
    """The config the plan records (:func:`lmaudit.studies.base.grouped_config`), without the
    facts of the data and how the embedder runs."""
    out = grouped_config(cfg, GROUPS)
    # the import's format is a fact of the data, recorded under inputs.import (a data key);
    # an unset import temperature leaves the plans made before it existed as they were
    out["study"].pop("import_format", None)
    if out["study"].get("import_temperature") is None:
        out["study"].pop("import_temperature", None)
    # how the embedder runs (runner, devices ...) is not part of the design either
    out["study"]["embedder"] = without_execution(out["study"].get("embedder"), EMBEDDER_EXECUTION_FIELDS)
    return out


def plan(cfg: DictConfig, *, freezing_open: bool = False) -> Plan:
    s = settings(cfg)
    if s.generations < 1 or s.items_per_list < 1 or s.max_tokens < 1:
        raise InputError("study: generations, items_per_list and max_tokens must be >= 1")
    resolved = plan_config(cfg)
    inputs: dict[str, Any] = {}
    found = log_import(s) if s.import_path and Path(s.import_path).exists() else None
    if found is not None:  # inspect logs: every file read, and the format
        inputs["import"] = plan_inputs(found)
    for key, field_name, given in (
        ("import", "import_path", None if found is not None else s.import_path),
        ("calibration", "calibration_path", s.calibration_path),
        ("profiles", "profiles_path", s.profiles_path),
        ("codebook", "codebook_path", s.codebook_path),
        ("echo_calibration", "echo_calibration_path", s.echo_calibration_path),
        ("ballots", "ranking.import_path", s.ranking.import_path),
    ):
        if given:
            p = Path(given)
            if p.exists():
                inputs[key] = {"path": str(p), "sha256": file_sha256(p)}
            elif freezing_open:  # an open registration: the data come later and are not bound
                inputs[key] = {"path": str(p), "sha256": None}
            else:
                raise InputError(f"{p}: file not found (study.{field_name})")
    m = design.materials(s)
    for name in ("targeted_bank.jsonl", "infinity_chat_100.jsonl", "templates.json", "personas.jsonl"):
        p = Path(s.materials) / name
        inputs[name] = {"path": str(p), "sha256": file_sha256(p)}
    body: dict[str, Any] = {
        "study": "choir",
        "mode": "import" if s.import_path else "elicit",
        "config": resolved,
        "inputs": inputs,
    }
    n = 0
    if not s.import_path:
        qs, conds = design.questions(s, m), design.conditions(s, m)
        members = ensemble(cfg, s)
        reqs = design.requests(s, m, qs, conds)
        body["members"] = [mm["name"] for mm in members]
        body["requests"] = [
            {
                "messages": list(r.messages),
                "n": r.n,
                "temperature": r.temperature,
                "seed": r.seed,
                "meta": r.meta,
            }
            for r in reqs
        ]
        n = len(reqs) * len(members)
    body["ranking"] = ranking_mode(s)
    if body["ranking"] == "elicit":
        body["evaluators"] = [e["name"] for e in evaluator_models(cfg, s)]
    return Plan.make(body, n)
