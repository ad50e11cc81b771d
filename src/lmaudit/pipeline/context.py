"""Where a run lives and what it is called: derived here, and only here.

The run directory is ``out_dir=`` when given, else ``<paths.results>/<study>/<run name>``;
the run name is ``run_name=``, else the registration's name (``prereg=``), else the study's
default, with a short digest of the plan-relevant overrides its words do not show
(:func:`design_suffix`). The MLflow experiment is ``mlflow.experiment`` or ``lmaudit-<study>``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from lmaudit.errors import InputError
from lmaudit.studies.base import Study
from lmaudit.studies.registry import get_study


def study_of(cfg: DictConfig) -> Study:
    return get_study(str(cfg.study.name))


_UNSAFE = re.compile(r"[/\\\x00-\x1f]")


def path_component(name: str, what: str) -> str:
    """``name`` when it is safe as one path component: not empty, not ``.`` or ``..``, no
    path separator or control character, no leading ``-`` or ``~``. Else an error naming
    ``what`` (the field the name came from)."""
    if not name.strip() or name in (".", "..") or _UNSAFE.search(name) or name[0] in "-~":
        raise InputError(
            f"{what} = {name!r} cannot name a run folder: use one path component without "
            "'/', '\\', control characters, a leading '-' or '~', and not '.' or '..' "
            "(out_dir= places a run anywhere)"
        )
    return name


def run_name(cfg: DictConfig) -> str:
    """The run's name, validated as one path component."""
    if cfg.get("run_name"):
        return path_component(str(cfg.run_name), "run_name")
    if cfg.get("prereg") is not None:
        return path_component(str(cfg.prereg.name), "prereg.name")
    name = str(study_of(cfg).default_run_name(cfg))
    name = path_component(name, f"the {cfg.study.name} study's run name (from model.name and its groups)")
    return name + design_suffix(cfg)


@functools.lru_cache(maxsize=8)
def _composed(config_name: str, overrides: tuple[str, ...]) -> DictConfig:
    from hydra import compose

    return compose(config_name=config_name, overrides=list(overrides))


def _references(cfg: DictConfig) -> tuple[DictConfig, DictConfig] | None:
    """What this run's group choices compose to with no field overrides, and the same with
    the study's own groups at their defaults (the study's default design). None when Hydra
    did not compose this run."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    if not (HydraConfig.initialized() and GlobalHydra.instance().is_initialized()):
        return None
    hc = HydraConfig.get()
    choices = {str(k): v for k, v in hc.runtime.choices.items() if not str(k).startswith("hydra/")}
    if choices.get("study") != cfg.study.name or hc.job.config_name is None:
        return None
    picked = tuple(f"{k}={v}" for k, v in sorted(choices.items()) if v is not None)
    own = f"study/{cfg.study.name}/"
    name = str(hc.job.config_name)
    return _composed(name, picked), _composed(name, tuple(p for p in picked if not p.startswith(own)))


def _unnamed(study: Any, ref: DictConfig, keys: list[str], cfg: DictConfig) -> dict[str, Any]:
    """Of ``keys`` (each set as in ``cfg`` on ``ref`` on its own), those that change the plan
    but not the readable name."""
    base_name, base_plan = study.default_run_name(ref), study.plan_config(ref)
    out: dict[str, Any] = {}
    for key in keys:
        value = OmegaConf.select(cfg, key, default=None)
        one = ref.copy()
        with open_dict(one):
            OmegaConf.update(one, key, value, merge=False, force_add=True)
        if study.plan_config(one) != base_plan and study.default_run_name(one) == base_name:
            out[key] = _plain(value)
    return out


def _leaves(a: Any, b: Any, prefix: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            k for key in sorted(set(a) | set(b)) for k in _leaves(a.get(key), b.get(key), f"{prefix}.{key}")
        ]
    return [] if a == b else [prefix]


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def design_suffix(cfg: DictConfig) -> str:
    """``-<digest>`` of the overrides that change the plan but not the study's readable run
    name (``items=sim_demo``, ``items.ids=[...]``, ``estimand.n=50``, ``model.base_url=...``);
    empty for the study's default design. Runs that measure different things never share a name."""
    refs = _references(cfg)
    if refs is None:
        return ""
    chosen, default = refs
    study = study_of(cfg)
    # field overrides (items.ids=...), then group options the name does not show (items=...);
    # a model that is not the one composed (the measured model of a re-analysis, from its
    # plan) has another schema than the composed one and is compared whole
    composed = OmegaConf.get_type(cfg, "model") is OmegaConf.get_type(chosen, "model")
    fields = ("study", "model") if composed else ("study",)
    keys = [k for n in fields for k in _leaves(_plain(chosen.get(n)), _plain(cfg.get(n)), n)]
    if not composed:
        keys.append("model")
    unnamed = _unnamed(study, chosen, keys, cfg)
    groups = [
        f"study.{g}" for g in study.groups if _plain(chosen.study.get(g)) != _plain(default.study.get(g))
    ]
    unnamed.update(_unnamed(study, default, groups, chosen))
    if not unnamed:
        return ""
    return "-" + hashlib.sha256(json.dumps(unnamed, sort_keys=True, default=str).encode()).hexdigest()[:6]


def run_dir(cfg: DictConfig) -> Path:
    if cfg.get("out_dir"):
        return Path(cfg.out_dir)
    root = Path(cfg.paths.results)
    out = root / path_component(str(cfg.study.name), "study.name") / run_name(cfg)
    if root.resolve() not in out.resolve().parents:  # a symlinked study folder, say
        raise InputError(f"run directory {out} lies outside paths.results ({root})")
    return out


def must_be_folder(path: Path, field: str) -> None:
    """Refuse (InputError naming ``field``) a folder path that is a file, or lies below one,
    before anything is planned or written there."""
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                where = "is a file" if p == path else f"lies below {p}, a file"
                raise InputError(f"{field} = {path} {where}, not a folder")
            return


def experiment_name(cfg: DictConfig) -> str:
    return str(cfg.mlflow.experiment or f"lmaudit-{cfg.study.name}")
