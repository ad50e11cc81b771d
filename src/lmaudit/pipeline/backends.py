"""The backends a study may open beyond the run's own (an ensemble, an embedder), each seen
through the run's response cache; the run's own model is served by the backend already loaded."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.backends.embed.cached import CachedEmbedder
from lmaudit.backends.registry import plain_config as _plain
from lmaudit.provenance.cache import ResponseCache
from lmaudit.provenance.digest import canonical_json

_B = TypeVar("_B")


class Backends:
    """A :class:`~lmaudit.studies.base.BackendProvider` over one response cache."""

    def __init__(
        self,
        cache: ResponseCache,
        own: tuple[Mapping[str, Any] | DictConfig, CachedBackend] | None,
        progress: bool,
    ):
        self.cache = cache
        self.progress = progress
        self._open: dict[str, Any] = {}
        self._own: Any = None
        if own is not None:
            self._open[canonical_json(_plain(own[0]))] = self._own = own[1]

    def _once(self, key: str, open_backend: Callable[[], _B]) -> _B:
        """The backend opened under ``key``, opened by ``open_backend`` the first time only."""
        if key not in self._open:
            self._open[key] = open_backend()
        return self._open[key]

    def sampler(self, model: Mapping[str, Any]) -> CachedBackend:
        from lmaudit.backends.registry import build_backend

        cfg = _plain(model)
        return self._once(
            canonical_json(cfg),
            lambda: CachedBackend(
                build_backend(cfg),
                self.cache,
                batch_size=int(cfg.get("batch_size", 16)),
                progress=self.progress,
            ),
        )

    def embedder(self, embedder: Mapping[str, Any]) -> CachedEmbedder:
        from lmaudit.backends.registry import build_embedder

        cfg = _plain(embedder)
        return self._once(
            "embed:" + canonical_json(cfg),
            lambda: CachedEmbedder(
                build_embedder(cfg),
                self.cache,
                batch_size=int(cfg.get("batch_size", 64)),
                progress=self.progress,
            ),
        )

    def refusals(self) -> dict[str, int]:
        """Draws answered without an answer by any backend opened here, by finish reason."""
        total: Counter[str] = Counter()
        for opened in self._open.values():
            total.update(getattr(opened, "refusals", None) or {})
        return dict(sorted(total.items()))

    def close(self) -> None:
        """Stop the worker processes of the backends opened here (Lightning runners); the
        run's own backend is closed by its opener."""
        for opened in self._open.values():
            close = getattr(opened.backend, "close", None)
            if opened is not self._own and callable(close):
                close()
