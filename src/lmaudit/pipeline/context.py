"""Where a run lives and what it is called: derived here, and only here.

The run directory is ``out_dir=`` when given, else ``<paths.results>/<study>/<run name>``;
the run name is ``run_name=``, else the registration's name (``prereg=``), else the study's
default. The MLflow experiment is ``mlflow.experiment`` or ``lmaudit-<study>``.
"""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import DictConfig

from lmaudit.provenance.io import InputError
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
    return path_component(name, f"the {cfg.study.name} study's run name (from model.name and its groups)")


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
