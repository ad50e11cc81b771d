"""Where a run lives and what it is called: derived here, and only here.

The run directory is ``out_dir=`` when given, else ``<paths.results>/<study>/<run name>``;
the run name is ``run_name=``, else the registration's name (``prereg=``), else the study's
default. The MLflow experiment is ``mlflow.experiment`` or ``lmaudit-<study>``.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from lmaudit.studies.base import Study
from lmaudit.studies.registry import get_study


def study_of(cfg: DictConfig) -> Study:
    return get_study(str(cfg.study.name))


def run_name(cfg: DictConfig) -> str:
    if cfg.get("run_name"):
        return str(cfg.run_name)
    if cfg.get("prereg") is not None:
        return str(cfg.prereg.name)
    return str(study_of(cfg).default_run_name(cfg))


def run_dir(cfg: DictConfig) -> Path:
    if cfg.get("out_dir"):
        return Path(cfg.out_dir)
    return Path(cfg.paths.results) / str(cfg.study.name) / run_name(cfg)


def experiment_name(cfg: DictConfig) -> str:
    return str(cfg.mlflow.experiment or f"lmaudit-{cfg.study.name}")
