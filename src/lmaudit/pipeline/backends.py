"""The backends a study may open beyond the run's own (an ensemble, an embedder), each seen
through the run's response cache; the run's own model is served by the backend already loaded."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.backends.embed.cached import CachedEmbedder
from lmaudit.backends.registry import plain_config as _plain
from lmaudit.provenance.cache import ResponseCache
from lmaudit.provenance.digest import canonical_json


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

    def sampler(self, model: Mapping[str, Any]) -> CachedBackend:
        from lmaudit.backends.registry import build_backend

        cfg = _plain(model)
        key = canonical_json(cfg)
        if key not in self._open:
            self._open[key] = CachedBackend(
                build_backend(cfg),
                self.cache,
                batch_size=int(cfg.get("batch_size", 16)),
                progress=self.progress,
            )
        backend: CachedBackend = self._open[key]
        return backend

    def embedder(self, embedder: Mapping[str, Any]) -> CachedEmbedder:
        from lmaudit.backends.registry import build_embedder

        cfg = _plain(embedder)
        key = "embed:" + canonical_json(cfg)
        if key not in self._open:
            self._open[key] = CachedEmbedder(
                build_embedder(cfg),
                self.cache,
                batch_size=int(cfg.get("batch_size", 64)),
                progress=self.progress,
            )
        emb: CachedEmbedder = self._open[key]
        return emb

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
