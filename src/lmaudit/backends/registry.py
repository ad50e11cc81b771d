"""The backends and embedders lmaudit knows, by name: each declared on its class, each imported
only when it is asked for.

A backend is one class deriving from :class:`~lmaudit.backends.api.BackendAPI` with
``@register_backend(name, schema=...)`` on it; an embedder has ``@register_embedder(kind)``. A
class that also runs under a runner other than the in-process one (``runner: lightning``) names
that runner's class in ``runners``. Importing the class's module fills the one table
(:data:`BACKENDS`, :data:`EMBEDDERS`: name -> class, config schema, runners).

So that a name is found without importing every backend (a ``sim`` run never imports torch),
:data:`BACKEND_MODULES` and :data:`EMBEDDER_MODULES` say which module declares each name, and
for a model backend where its config schema is: a config is checked, and Hydra's ConfigStore
filled, before any backend is imported. This module imports no backend: backends import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import EntryPoint
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

from lmaudit.backends.api import BackendAPI
from lmaudit.config.execution import EMBEDDER_EXECUTION_FIELDS, RUNNER_FIELDS

__all__ = [
    "BACKENDS",
    "BACKEND_MODULES",
    "EMBEDDERS",
    "EMBEDDER_MODULES",
    "Declared",
    "Registered",
    "backend_entry",
    "backend_names",
    "backend_schema",
    "build_backend",
    "build_embedder",
    "embedder_entry",
    "plain_config",
    "register_backend",
    "register_embedder",
    "serve_if_secondary",
]


@dataclass(frozen=True)
class Declared:
    """Where a name is declared: the module whose import registers its class, and (model
    backends) its config schema as ``"module:Class"``."""

    module: str
    schema: str | None = None


@dataclass(frozen=True)
class Registered:
    """A registered name: its class, its config schema, and the class that runs it under each
    runner other than ``inprocess`` (``"module:Class"``, imported when that runner is asked for)."""

    name: str
    cls: type[BackendAPI]
    schema: type | None = None
    runners: Mapping[str, str] = field(default_factory=dict)


#: ``model.backend`` -> where it is declared (lm-evaluation-harness' lazy MODEL_MAPPING).
BACKEND_MODULES: dict[str, Declared] = {
    "hf": Declared("lmaudit.backends.hf.backend", "lmaudit.backends.hf.config:HFModelConfig"),
    "openai": Declared("lmaudit.backends.openai.backend", "lmaudit.backends.openai.config:OpenAIModelConfig"),
    "sim": Declared("lmaudit.backends.sim", "lmaudit.backends.sim.config:SimModelConfig"),
}
#: embedder ``kind`` -> where it is declared.
EMBEDDER_MODULES: dict[str, Declared] = {
    "minilm": Declared("lmaudit.backends.embed.st"),
    "openai": Declared("lmaudit.backends.embed.openai"),
    "sim": Declared("lmaudit.backends.sim.embed"),
}
#: The registered model backends and embedders, filled by the decorators.
BACKENDS: dict[str, Registered] = {}
EMBEDDERS: dict[str, Registered] = {}

_B = TypeVar("_B", bound=type[BackendAPI])


def _path(obj: type) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _register(
    table: dict[str, Registered],
    declared: Mapping[str, Declared],
    what: str,
    name: str,
    schema: type | None,
    runners: Mapping[str, str] | None,
) -> Callable[[_B], _B]:
    def decorate(cls: _B) -> _B:
        if not (isinstance(cls, type) and issubclass(cls, BackendAPI)):
            raise TypeError(f"{what} {name!r}: {cls!r} does not derive from BackendAPI")
        lazy = declared.get(name)
        if lazy is not None and schema is not None and lazy.schema not in (None, _path(schema)):
            raise ValueError(f"{what} {name!r}: schema {_path(schema)} is not the declared {lazy.schema}")
        known = table.get(name)
        if known is not None and known.cls is not cls:
            raise ValueError(f"{what} {name!r} is registered twice: {_path(known.cls)} and {_path(cls)}")
        table[name] = Registered(name, cls, schema, dict(runners or {}))
        return cls

    return decorate


def register_backend(
    name: str, *, schema: type | None = None, runners: Mapping[str, str] | None = None
) -> Callable[[_B], _B]:
    """Class decorator: ``model.backend = name`` builds this class (:meth:`BackendAPI.from_config`),
    its model configs have the schema ``schema`` (a :class:`~lmaudit.config.model.ModelConfig`),
    and ``runners`` maps a ``model.runner`` other than ``inprocess`` to the ``"module:Class"``
    that runs it there (called with the model config and its runner fields)."""
    return _register(BACKENDS, BACKEND_MODULES, "backend", name, schema, runners)


def register_embedder(name: str, *, runners: Mapping[str, str] | None = None) -> Callable[[_B], _B]:
    """Class decorator: an embedder config with ``kind = name`` builds this class; ``runners`` as
    for :func:`register_backend`."""
    return _register(EMBEDDERS, EMBEDDER_MODULES, "embedder", name, None, runners)


def _known(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in sorted(names))


def _entry(
    table: dict[str, Registered], declared: Mapping[str, Declared], name: Any, where: str
) -> Registered:
    """``name``'s registration, importing its module first if need be; ValueError listing the
    known names otherwise."""
    if isinstance(name, str) and name not in table and name in declared:
        import_module(declared[name].module)
    if not isinstance(name, str) or name not in table:
        raise ValueError(f"{where} = {name!r} is not one of {_known({*declared, *table})}")
    return table[name]


def backend_entry(name: Any) -> Registered:
    """The registration of the backend ``name`` (only its module is imported)."""
    return _entry(BACKENDS, BACKEND_MODULES, name, "model config: field 'backend'")


def embedder_entry(kind: Any) -> Registered:
    """The registration of the embedder ``kind`` (only its module is imported)."""
    return _entry(EMBEDDERS, EMBEDDER_MODULES, kind, "embedder config: field 'kind'")


def backend_names() -> list[str]:
    """Every backend name known, declared or registered, sorted."""
    return sorted({*BACKEND_MODULES, *BACKENDS})


def backend_schema(name: str) -> type | None:
    """The config schema of the backend ``name``, without importing the backend where it is
    declared in :data:`BACKEND_MODULES`; None for an unknown name."""
    if name in BACKENDS:
        return BACKENDS[name].schema
    lazy = BACKEND_MODULES.get(name)
    if lazy is None or lazy.schema is None:
        return None
    loaded = EntryPoint(name=name, value=lazy.schema, group="lmaudit.backends").load()
    assert isinstance(loaded, type), f"{lazy.schema} is not a class"
    return loaded


def plain_config(cfg: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    """A config node as a plain dict (interpolations resolved)."""
    if isinstance(cfg, DictConfig):
        out = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(out, dict)
        return {str(k): v for k, v in out.items()}
    return dict(cfg)


def _runner(entry: Registered, runner: Any, where: str) -> Any:
    """The class that runs ``entry`` under ``runner``."""
    target = entry.runners.get(runner) if isinstance(runner, str) else None
    if target is None:
        raise ValueError(
            f"{where}: field 'runner' = {runner!r} does not run {entry.name!r} "
            f"(its runners: {_known({'inprocess', *entry.runners})})"
        )
    return EntryPoint(name=runner, value=target, group="lmaudit.backends").load()


def build_backend(model_cfg: Mapping[str, Any] | DictConfig) -> Any:
    """The backend named by ``model.backend``, run by ``model.runner`` (default: in this
    process); only that backend's modules are imported."""
    cfg = plain_config(model_cfg)
    cfg.pop("base_model", None)  # describes the checkpoint for framing choices; not a backend option
    entry = backend_entry(cfg.get("backend"))
    execution = {k: cfg.pop(k) for k in RUNNER_FIELDS if k in cfg}
    runner = execution.get("runner", "inprocess")
    if runner == "inprocess":
        return entry.cls.from_config(cfg)
    return _runner(entry, runner, "model config")(cfg, execution)


def serve_if_secondary(model_cfg: Mapping[str, Any] | DictConfig) -> bool:
    """Whether this process only serves the jobs of the model's runner (a SLURM task other than
    0): the runner class's :meth:`~BackendAPI.serve_if_secondary`. A model run in-process never
    does, and nothing is imported for it."""
    if model_cfg.get("runner", "inprocess") == "inprocess":
        return False
    cfg = plain_config(model_cfg)
    return bool(
        _runner(backend_entry(cfg.get("backend")), cfg["runner"], "model config").serve_if_secondary(cfg)
    )


def build_embedder(cfg: Mapping[str, Any] | DictConfig) -> Any:
    """The embedding backend named by ``kind``; only its modules are imported. With ``runner``
    other than ``inprocess`` (``lightning``: MiniLM only) it runs as its class declares."""
    c = plain_config(cfg)
    execution = {k: c.pop(k) for k in EMBEDDER_EXECUTION_FIELDS if k in c}
    entry = embedder_entry(c.get("kind"))
    runner = execution.get("runner", "inprocess")
    if runner == "inprocess":
        return entry.cls.from_config(c)
    return _runner(entry, runner, "embedder config")(c, execution)
