"""``sim`` embedder: a deterministic hashed bag of words, for tests.

Each lower-cased alphanumeric word is hashed (SHA-256, so the same in every process) to one
of ``dim`` coordinates and a sign; a text's vector is the sum over its words, L2-normalised.
Identical texts (up to case and punctuation) get identical vectors, texts sharing words are
close (cosine = shared-word overlap, barring hash collisions) and texts with no word in common
are near orthogonal. A text with no word maps to a fixed ``<empty>`` token.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.backends.api import BackendAPI
from lmaudit.backends.registry import register_embedder

BACKEND_VERSION = 1
_WORD = re.compile(r"[a-z0-9]+")


@register_embedder("sim")
class SimEmbedder(BackendAPI):
    identity_name = "sim-embed"
    identity_version = BACKEND_VERSION

    def __init__(self, dim: int = 256, seed: int = 0):
        if dim < 2:
            raise ValueError(f"dim must be >= 2, got {dim}")
        self.dim = int(dim)
        self.seed = int(seed)
        self.calls: list[list[str]] = []  # what each embed() call was asked (tests count work)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SimEmbedder:
        """From an embedder config (``kind: sim``): ``dim`` [256] and ``seed`` [0]."""
        return cls(dim=int(cfg.get("dim", 256)), seed=int(cfg.get("seed", 0)))

    def identity_fields(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "seed": self.seed,
        }

    def _slot(self, word: str) -> tuple[int, float]:
        h = hashlib.sha256(f"{self.seed}:{word}".encode()).digest()
        return int.from_bytes(h[:8], "big") % self.dim, 1.0 if h[8] & 1 else -1.0

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()) or ["<empty>"]:
                j, sign = self._slot(word)
                out[i, j] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0  # words whose signs cancel on one coordinate: never all of them
        out /= norms
        zero = ~out.any(axis=1)
        out[zero, 0] = 1.0
        return out.astype(np.float32)
