"""Everything before the first draw: the draws study's settings, its analysis parameters (checked
before any model call), the run's name, the sampling requests and the plan (every request, or
the import's digests)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmaudit.errors import InputError
from lmaudit.interop import audit as log_audit
from lmaudit.interop.detect import detect
from lmaudit.provenance.digest import file_sha256
from lmaudit.studies.base import Plan, grouped_config
from lmaudit.studies.draws.config import DrawsStudyConfig
from lmaudit.studies.draws.family import AnalysisParams
from lmaudit.studies.draws.protocol import build_requests, load_probes, make_normaliser

__all__ = [
    "DATA_KEYS",
    "analysis_params",
    "default_run_name",
    "normaliser",
    "plan",
    "plan_config",
    "rho_grid",
    "sampling_requests",
    "settings",
]

# what names the data in an imported audit: an open registration (prereg data: open) binds
# the plan without these, so predictions can be frozen before the draws file exists
DATA_KEYS = ("config.study.import_path", "inputs.import")


def settings(cfg: DictConfig) -> DrawsStudyConfig:
    obj = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(DrawsStudyConfig), cfg.study))
    assert isinstance(obj, DrawsStudyConfig)
    return obj


def rho_grid(s: DrawsStudyConfig) -> tuple[float, ...]:
    if not (0.0 <= s.rho_min < s.rho_max <= 1.0) or s.rho_step <= 0:
        raise InputError(
            f"study: need 0 <= rho_min < rho_max <= 1 and rho_step > 0, got "
            f"{s.rho_min}, {s.rho_max}, {s.rho_step}"
        )
    steps = math.floor((s.rho_max - s.rho_min) / s.rho_step + 1e-9)
    return tuple(round(s.rho_min + i * s.rho_step, 10) for i in range(steps + 1))


def analysis_params(s: DrawsStudyConfig) -> AnalysisParams:
    for field, value in (("permutations", s.permutations), ("sims_per_step", s.sims_per_step)):
        if value < 1:
            raise InputError(f"study: field {field!r} must be >= 1, got {value}")
    if not 0.0 < s.alpha < 1.0:
        raise InputError(f"study: field 'alpha' must lie in (0, 1), got {s.alpha}")
    if any(not 0.0 <= r <= 1.0 for r in s.power_rhos):
        raise InputError(f"study: field 'power_rhos' must hold values in [0, 1], got {s.power_rhos}")
    return AnalysisParams(
        n_perm=s.permutations,
        rho_grid=rho_grid(s),
        n_sims=s.sims_per_step,
        power_rhos=tuple(float(r) for r in s.power_rhos),
        alpha=s.alpha,
        grouped_flag_p=s.grouped_flag_p,
        seed=s.analysis_seed,
    )


def default_run_name(cfg: DictConfig) -> str:
    s = settings(cfg)
    if s.import_path:
        return f"import-{Path(s.import_path).stem}"
    return f"n{s.n}-t{s.temperature:g}-r{s.replicates}-{s.normalise.kind}-{cfg.model.name}"


def sampling_requests(cfg: DictConfig, s: DrawsStudyConfig) -> list[Any]:
    if s.n < 1 or s.replicates < 1 or s.max_tokens < 1:
        raise InputError(
            f"study: n, replicates and max_tokens must be >= 1, got {s.n}, {s.replicates}, {s.max_tokens}"
        )
    names = [c.name for c in s.conditions]
    if not names or len(set(names)) != len(names):
        raise InputError(f"study: field 'conditions' needs distinct names, got {names}")
    probes = load_probes(s.probes_path, s.probe_ids)
    conds = [{"name": c.name, "system": c.system, "temperature": c.temperature} for c in s.conditions]
    exemplars = [{"prompt": e.prompt, "answer": e.answer} for e in s.exemplars]
    return build_requests(
        probes,
        conds,
        exemplars,
        replicates=s.replicates,
        n=s.n,
        temperature=s.temperature,
        top_p=s.top_p,
        max_tokens=s.max_tokens,
        seed=s.seed,
    )


def normaliser(s: DrawsStudyConfig) -> Any:
    return make_normaliser(
        s.normalise.kind,
        pattern=s.normalise.pattern,
        labels=s.normalise.labels,
        case_sensitive=s.normalise.case_sensitive,
    )


def plan_config(cfg: DictConfig) -> dict[str, Any]:
    """The config the plan records (:func:`lmaudit.studies.base.grouped_config`). The format of
    the import is a fact of the data: the plan records it under ``inputs.import`` (a data key),
    so an open registration scores a log of any format."""
    out = grouped_config(cfg, ())
    out["study"].pop("import_format", None)
    return out


def plan(cfg: DictConfig, *, freezing_open: bool = False) -> Plan:
    """The resolved plan: config, input digests and (sampling) every request, with its digest."""
    s = settings(cfg)
    analysis_params(s)
    normaliser(s)
    resolved = plan_config(cfg)
    if s.import_path:
        p = Path(s.import_path)
        inputs: dict[str, dict[str, Any]]
        found = detect(p, s.import_format) if p.exists() else None
        if found is not None and found.format != "lmaudit":  # a log: every file it reads
            inputs = {"import": log_audit.plan_inputs(found)}
        elif found is not None:
            inputs = {"import": {"path": str(p), "sha256": file_sha256(p)}}
        elif freezing_open:  # the data come later; the registration omits them
            inputs = {"import": {"path": str(p), "sha256": None}}
        else:
            raise InputError(f"{p}: file not found (study.import_path)")
        requests: list[dict[str, Any]] = []
    else:
        inputs = {"probes": {"path": s.probes_path, "sha256": file_sha256(s.probes_path)}}
        requests = [
            {
                "messages": list(r.messages),
                "n": r.n,
                "temperature": r.temperature,
                "top_p": r.top_p,
                "max_tokens": r.max_tokens,
                "seed": r.seed,
                "meta": r.meta,
            }
            for r in sampling_requests(cfg, s)
        ]
    body = {
        "study": "draws",
        "mode": "import" if s.import_path else "sample",
        "config": resolved,
        "inputs": inputs,
        "requests": requests,
    }
    return Plan.make(body, len(requests))
