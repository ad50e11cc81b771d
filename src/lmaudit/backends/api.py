"""The base class of every backend and embedder: the hooks the pipeline calls, with defaults.

A backend derives from :class:`BackendAPI`, declares itself with
``@register_backend(name, schema=...)`` (:mod:`lmaudit.backends.registry`) and implements its
contracts (:mod:`lmaudit.backends.base`: label log-probabilities, sampling; embeddings:
:mod:`lmaudit.backends.embed.base`). What every backend has in common lives here once:

* :attr:`identity`: ``{"backend": identity_name, "backend_version": identity_version}`` and the
  backend's own :meth:`identity_fields` (a backend whose identity has another form overrides it);
* :meth:`describe`: what the audit record shows beyond the identity (default: nothing);
* :meth:`load` (load the model before the first answer it needs) and :meth:`close` (stop worker
  processes, close connections): default, nothing to do;
* :meth:`from_config`: the backend a plain config dict describes (default: its fields, but
  for the naming keys, as keywords);
* :meth:`serve_if_secondary`: under a multi-process runner, a process other than the first
  serves the runner's jobs and does nothing else (default: never).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = ["NAMING_KEYS", "BackendAPI"]

#: Config keys that name a backend rather than configure it: the registry's name (``backend``, an
#: embedder's ``kind``) and the display name.
NAMING_KEYS = frozenset({"backend", "kind", "name"})


class BackendAPI:
    """Base of the backends and embedders (module docstring)."""

    #: whether requests' ``meta`` enters the cache key (only the sim agents read it)
    reads_meta: bool = False
    #: the identity's ``backend`` and ``backend_version`` entries (:attr:`identity`)
    identity_name: ClassVar[str] = ""
    identity_version: ClassVar[int] = 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Any:
        """The backend a plain config dict describes (default: its fields as keywords, but for
        the :data:`NAMING_KEYS`)."""
        return cls(**{k: v for k, v in config.items() if k not in NAMING_KEYS})

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes outputs; its digest prefixes every cache key."""
        return {
            "backend": self.identity_name,
            "backend_version": self.identity_version,
            **self.identity_fields(),
        }

    def identity_fields(self) -> dict[str, Any]:
        """The backend's own identity entries (model, revision, dtype ...)."""
        raise NotImplementedError(f"{type(self).__name__} declares no identity")

    def describe(self) -> dict[str, Any]:
        """What an audit record shows about this backend beyond its identity."""
        return {}

    def load(self) -> None:
        """Load the model now (the pipeline calls it before the first answer it needs)."""

    def close(self) -> None:
        """Release what the backend holds (worker processes, connections)."""

    @classmethod
    def serve_if_secondary(cls, config: Mapping[str, Any]) -> bool:
        """Under a runner of many processes, a process other than the first serves the runner's
        jobs here and returns True (the caller then does nothing else); default: False."""
        return False
