"""Hydra's ConfigStore filled: every schema, the resolvers and the help page, before Hydra
composes anything (``run.py``, report rebuilds, tests and benchmarks call
:func:`register_configs` first)."""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from lmaudit.backends.registry import backend_names, backend_schema
from lmaudit.config.execution import register_resolvers
from lmaudit.config.help import register_help
from lmaudit.config.schema import RootConfig
from lmaudit.config.studies import known_studies


def register_configs() -> None:
    """Store every schema in Hydra's ConfigStore: the shared ones, each backend's model schema
    (``model/_<backend>``), and each known study's (``study/_<name>``) with its groups'
    (``study/<name>/<group>/_<group>``)."""
    register_resolvers()
    register_help()
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=RootConfig)
    for backend in backend_names():
        schema = backend_schema(backend)
        if schema is not None:
            cs.store(group="model", name=f"_{backend}", node=schema)
    for study in known_studies():
        cs.store(group="study", name=f"_{study.name}", node=study.config)
        if not study.has_yaml:  # a study from another package: selectable by its schema alone
            cs.store(group="study", name=study.name, node=study.config)
        for group, schema in study.groups.items():
            cs.store(group=f"study/{study.name}/{group}", name=f"_{group}", node=schema)
