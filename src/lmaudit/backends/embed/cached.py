"""Embeddings through the shared content-addressed cache (:class:`CachedEmbedder`).

:class:`CachedEmbedder` serves an :class:`~lmaudit.backends.embed.base.EmbeddingBackend` through
:class:`~lmaudit.provenance.cache.ResponseCache`: one entry per distinct text, keyed by
``cache_key(identity digest, {"kind": "embed", "text": text})`` (a payload kind the label and
sampling contracts never use, so their keys are unchanged). Within a call identical strings
are embedded once; across calls and processes a text already in the cache is never embedded
again, and concurrent processes claim what they compute, as for the other contracts.
Texts are many and short, so a call claims all the texts it will embed with one claim file
and stores each batch's vectors as one pack (:meth:`ResponseCache.put_many`); with a file per
text, creating the files cost about half as much as running MiniLM. A
backend with ``fill_embeddings`` (the Lightning runner, :mod:`lmaudit.backends.hf.lightning.embed`)
is handed every missing text with its key and writes the entries itself; they are read back.

Implementations: :mod:`lmaudit.backends.embed.st` (sentence-transformers, MiniLM shipped on
PyPI), :mod:`lmaudit.backends.embed.openai` (OpenAI-compatible ``/v1/embeddings``) and
:mod:`lmaudit.backends.sim.embed` (a deterministic hashed bag-of-words for tests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.backends.cached import CachedBackend
from lmaudit.backends.embed.base import EmbeddingBackend, Matrix, decode_vector, vector_entries
from lmaudit.errors import BackendError
from lmaudit.provenance.cache import ResponseCache, cache_key

__all__ = ["CachedEmbedder"]


class CachedEmbedder(CachedBackend):
    """An :class:`EmbeddingBackend` seen through the response cache."""

    def __init__(self, backend: Any, cache: ResponseCache, *, batch_size: int = 64, **options: Any):
        """As :class:`CachedBackend` (``progress``, ``poll_s``), with 64 texts a batch by default."""
        if not isinstance(backend, EmbeddingBackend):
            raise TypeError(f"backend {type(backend).__name__} has no embedding contract")
        super().__init__(backend, cache, batch_size=batch_size, **options)
        self.seconds = {"embed": 0.0}

    def key(self, text: str) -> str:
        return cache_key(self.digest, {"kind": "embed", "text": text})

    @property
    def identity(self) -> dict[str, Any]:
        return dict(self.backend.identity)

    def embed(self, texts: Sequence[str], desc: str = "embedding") -> Matrix:
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text {i} is {type(t).__name__}, not str")
        unique = list(dict.fromkeys(texts))
        keys = [self.key(t) for t in unique]
        found: list[NDArray[np.float32] | None] = [None] * len(unique)

        def load(i: int) -> bool:
            found[i] = decode_vector(self.cache.get(keys[i]))
            return found[i] is not None

        # A backend whose workers write the cache themselves (the Lightning runner) gets every
        # missing text with its key; the vectors are then read back from the cache.
        fill = getattr(self.backend, "fill_embeddings", None)

        def compute(idx: list[int], stored: Callable[[int], None]) -> None:
            if fill is not None:
                self._filled_by_backend(fill, [(keys[i], unique[i]) for i in idx], idx, load, stored)
                return
            batch = [unique[i] for i in idx]
            name = type(self.backend).__name__
            rows, entries = vector_entries(self.backend.embed(batch), len(batch), name)
            # one identity, one dimension: vectors of another length than those already known
            # (cached, stored by an earlier batch, or the embedder's declared dimension) are
            # refused before they are cached, so a server that changes its answer cannot leave
            # both lengths under one identity
            declared = getattr(self.backend, "dim", None)
            known = {v.shape[0] for v in found if v is not None} | ({int(declared)} if declared else set())
            if known and {rows.shape[1]} != known:
                raise BackendError(
                    f"{name}: the embedder returned vectors of dimension {rows.shape[1]} where this "
                    f"identity's are {sorted(known)}; the batch is refused and not cached"
                )
            # one pack per batch: a file per text would cost about as much as embedding it
            self.cache.put_many([(keys[i], entry) for i, entry in zip(idx, entries, strict=True)])
            for i, row in zip(idx, rows, strict=True):
                found[i] = row
                stored(i)

        # longest first, so each batch holds texts of similar length (little padding), as
        # sentence-transformers' own encode orders them; the order is a pure function of the texts
        missing = sorted(
            (i for i in range(len(unique)) if not load(i)), key=lambda i: (-len(unique[i]), unique[i])
        )
        with self._bar(len(unique), len(unique) - len(missing), desc, "text") as bar:
            self._fill(
                missing,
                lambda i: keys[i],
                load,
                compute,
                bar,
                lambda i: 1,
                whole=fill is not None,
                grouped=True,
                contract="embed",
            )
        dims = {v.shape[0] for v in found if v is not None}
        if len(dims) > 1:
            raise BackendError(f"embeddings of different dimensions {sorted(dims)} under one identity")
        dim = dims.pop() if dims else int(getattr(self.backend, "dim", 0) or 0)
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        rows: list[NDArray[np.float32]] = []
        for text, v in zip(unique, found, strict=True):
            if v is None:
                raise BackendError(f"no embedding for {text[:60]!r} after filling the cache")
            rows.append(v)
        row_of = {t: k for k, t in enumerate(unique)}
        return np.stack(rows).astype(np.float32)[[row_of[t] for t in texts]]
