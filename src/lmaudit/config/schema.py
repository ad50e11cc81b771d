"""The shared config schemas (root, prereg, paths, mlflow); :mod:`lmaudit.config.store` registers
them with each backend's model schema (declared beside the backend,
:mod:`lmaudit.backends.registry`) and every study's own schema in Hydra's ConfigStore.

YAML files under ``conf/`` only override these dataclasses (each starts with
``defaults: [<schema>, _self_]``), so every default lives here and only here, and a
typo'd or mistyped key fails at composition time, before any model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from lmaudit.config.ranges import ranged


@dataclass
class PreregConfig:
    """A registration: its name and declarative predictions (see lmaudit.prereg).

    A prereg config may also select the study's other groups (``defaults: - override /framing: ...``)
    so that ``prereg=<name>`` alone names the whole registered design."""

    name: str = ranged(MISSING, nonempty=True)
    description: str = ""
    predictions: list[Any] = field(default_factory=list)
    # bound: the plan's data inputs are part of the registration (the default). open: the
    # registration precedes its data (predictions about a file still to be imported); it binds
    # everything but the study's data keys, and the data scored are digested with the scores.
    data: str = ranged("bound", choices=("bound", "open"))


@dataclass
class PathsConfig:
    results: str = ranged("results", nonempty=True)
    # ad-hoc runs (git-ignored); DVC runs pass cache/<study>/<run>
    cache: str = ranged(".cache/responses", nonempty=True)
    # after a completed measurement, pack the cache and keep only the keys the run used; for a
    # folder the run owns (DVC runs pass true), never for one shared by runs (docs/architecture.md)
    cache_compact: bool = False
    mlruns: str = ranged("mlruns", nonempty=True)
    prereg: str = ranged("prereg", nonempty=True)
    # the registration files (conf/prereg/<name>.yaml); a frozen registration seals its file
    registrations: str = ranged("conf/prereg", nonempty=True)


@dataclass
class MLflowConfig:
    enabled: bool = True
    experiment: str | None = None  # default: "lmaudit-<study>"


@dataclass
class RootConfig:
    study: Any = MISSING  # the selected study's schema (studies/<name>/config.py)
    model: Any = MISSING
    prereg: PreregConfig | None = None  # a registration when prereg=<name> is selected
    stage: str = ranged("all", choices=("plan", "freeze", "measure", "analyze", "report", "all"))
    out_dir: str | None = None  # default: <paths.results>/<study>/<run_name>
    # default: the study's (qq: <model>-<framing>-<mapping>-<estimand>); one path component
    run_name: str | None = ranged(None, nonempty=True)
    measurements: str | None = None  # analyze: a measurement file to (re-)analyse
    # replace a run directory's plan or results made under another config (nothing is deleted without it)
    overwrite: bool = False
    progress: bool = True
    paths: PathsConfig = field(default_factory=PathsConfig)
    mlflow: MLflowConfig = field(default_factory=MLflowConfig)
