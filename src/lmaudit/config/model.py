"""What every model config declares: its backend's name and a display name.

Each backend declares its own schema, a subclass of :class:`ModelConfig`, beside its class
(``@register_backend(name, schema=...)``, :mod:`lmaudit.backends.registry`); the ConfigStore
stores it as ``model/_<name>``.
"""

from __future__ import annotations

from dataclasses import MISSING as _NO_DEFAULT
from dataclasses import dataclass, fields
from typing import Any

from omegaconf import MISSING

from lmaudit.config.ranges import ranged

__all__ = ["ModelConfig", "schema_defaults"]


@dataclass
class ModelConfig:
    backend: str = MISSING  # a registered backend's name (lmaudit.backends.registry)
    name: str = ranged(MISSING, nonempty=True)  # display name used in run names and MLflow


def schema_defaults(schema: type) -> dict[str, Any]:
    """The defaults a config schema (a dataclass) declares, by field name; a required field
    (``MISSING``) and a field with a default factory are left out."""
    return {
        f.name: f.default for f in fields(schema) if f.default is not _NO_DEFAULT and f.default != MISSING
    }
