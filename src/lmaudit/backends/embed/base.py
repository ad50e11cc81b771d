"""The third backend contract, **embeddings**, and the exact form its vectors are stored in.

An :class:`EmbeddingBackend` turns texts into a ``float32`` matrix with one L2-normalised row
per text, in input order (:meth:`~EmbeddingBackend.embed`). Like the other contracts
(:mod:`lmaudit.backends.base`) it identifies itself by ``identity`` (everything that changes the
vectors: model, weights digest, output dimension, backend version), and that digest prefixes
every cache key (:mod:`lmaudit.backends.embed.cached`). Vectors are stored exactly, as base64 of
their little-endian float32 bytes (:func:`vector_entries`).
"""

from __future__ import annotations

import base64
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from lmaudit.backends.base import Backend
from lmaudit.errors import BackendError

__all__ = [
    "EmbeddingBackend",
    "Matrix",
    "as_unit_rows",
    "decode_vector",
    "encode_vector",
    "vector_entries",
]

Matrix = NDArray[np.float32]


@runtime_checkable
class EmbeddingBackend(Backend, Protocol):
    def embed(self, texts: list[str]) -> Matrix:
        """One L2-normalised float32 row per text, in order."""
        ...


def as_unit_rows(vectors: Any, n: int, where: str) -> Matrix:
    """Check an embedder's output (``n`` finite, non-zero rows) and L2-normalise it as float32."""
    arr = np.asarray(vectors, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise BackendError(f"{where}: expected {n} embedding rows, got an array of shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise BackendError(f"{where}: embeddings hold non-finite values")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise BackendError(f"{where}: an embedding is all zeros")
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


def encode_vector(v: NDArray[np.float32]) -> dict[str, Any]:
    return {"dim": int(v.shape[0]), "f32": base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")}


def vector_entries(vectors: Any, n: int, where: str) -> tuple[Matrix, list[dict[str, Any]]]:
    """An embedder's output for ``n`` texts as unit rows, and the cache entries that store them.
    Every writer of embedding entries (:mod:`lmaudit.backends.embed.cached`, the Lightning ranks
    of :mod:`lmaudit.backends.hf.lightning.embed`) goes through here."""
    rows = as_unit_rows(vectors, n, where)
    return rows, [encode_vector(r) for r in rows]


def decode_vector(entry: Any) -> NDArray[np.float32] | None:
    """A cached vector, or None when the entry is not one (treated as a miss)."""
    if not isinstance(entry, dict) or "f32" not in entry:
        return None
    v = np.frombuffer(base64.b64decode(entry["f32"]), dtype="<f4").astype(np.float32)
    return v if v.shape[0] == entry.get("dim") else None
