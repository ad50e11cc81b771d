"""The embedding contract: the sim embedder's properties and the cache (identical strings
embedded once per call, never again once cached, keyed by the embedder's identity)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from lmaudit.backends.base import LabelRequest, identity_digest
from lmaudit.backends.embed.base import EmbeddingBackend, as_unit_rows
from lmaudit.backends.embed.cached import CachedEmbedder
from lmaudit.backends.sim.embed import SimEmbedder
from lmaudit.errors import BackendError
from lmaudit.provenance.cache import ResponseCache, cache_key


def test_sim_embedder_properties() -> None:
    e = SimEmbedder(dim=512)
    assert isinstance(e, EmbeddingBackend)
    v = e.embed(
        ["The cat sat on the mat.", "the CAT sat on the mat", "cat on mat", "quarterly revenue grew", ""]
    )
    assert v.dtype == np.float32 and v.shape == (5, 512)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    sims = v @ v.T
    assert sims[0, 1] == pytest.approx(1.0, abs=1e-6)  # case and punctuation do not matter
    assert 0.5 < sims[0, 2] < 1.0  # overlapping words: close
    assert abs(sims[0, 3]) < 0.2  # no shared word: near orthogonal
    assert np.array_equal(
        SimEmbedder(dim=512).embed(["cat on mat"]), e.embed(["cat on mat"])
    )  # deterministic
    assert not np.array_equal(SimEmbedder(dim=512, seed=1).embed(["cat"]), e.embed(["cat"]))
    assert SimEmbedder(dim=64).identity != e.identity


def test_cache_embeds_identical_strings_once(tmp_path: Path) -> None:
    sim = SimEmbedder(dim=64)
    cached = CachedEmbedder(sim, ResponseCache(tmp_path / "cache"), progress=False, batch_size=2)
    texts = ["alpha beta", "gamma", "alpha beta", "delta", "gamma", "alpha beta"]
    out = cached.embed(texts)
    assert out.shape == (6, 64) and out.dtype == np.float32
    assert sorted(t for call in sim.calls for t in call) == ["alpha beta", "delta", "gamma"]
    assert np.array_equal(out, sim.embed(texts))  # stored exactly (float32 bytes)
    assert np.array_equal(out[0], out[2]) and np.array_equal(out[1], out[4])
    sim.calls.clear()
    again = CachedEmbedder(sim, ResponseCache(tmp_path / "cache"), progress=False)
    assert np.array_equal(
        again.embed(["delta", "alpha beta", "epsilon"]), sim.embed(["delta", "alpha beta", "epsilon"])
    )
    assert sim.calls[0] == ["epsilon"]  # only the new text was embedded (the second call is ours)
    assert again.embed([]).shape == (0, 64)


def test_cache_keys_carry_the_embedder_identity(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    a, b = (
        CachedEmbedder(SimEmbedder(dim=64), cache, progress=False),
        CachedEmbedder(SimEmbedder(dim=32), cache, progress=False),
    )
    assert a.key("x") != b.key("x")
    assert a.key("x") == cache_key(
        identity_digest(SimEmbedder(dim=64).identity), {"kind": "embed", "text": "x"}
    )
    assert a.embed(["x"]).shape == (1, 64) and b.embed(["x"]).shape == (1, 32)
    # the label contract's keys are untouched by the new payload kind
    req = LabelRequest(messages=({"role": "user", "content": "x"},), labels=("A", "B"))
    assert cache_key("d", {**req.payload(False), "top_k": 5}) == cache_key(
        "d",
        {"kind": "labels", "messages": [{"role": "user", "content": "x"}], "labels": ["A", "B"], "top_k": 5},
    )
    with pytest.raises(TypeError, match="no embedding contract"):
        CachedEmbedder(object(), cache)


class SlowSim(SimEmbedder):
    def embed(self, texts: list[str]) -> np.ndarray:
        time.sleep(0.05)
        return super().embed(texts)


def test_concurrent_callers_embed_each_text_once(tmp_path: Path) -> None:
    sim = SlowSim(dim=32)
    texts = [f"text {i % 7}" for i in range(30)]
    results: list[np.ndarray] = []

    def worker() -> None:
        results.append(
            CachedEmbedder(sim, ResponseCache(tmp_path / "c"), progress=False, poll_s=0.01).embed(texts)
        )

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and all(np.array_equal(r, results[0]) for r in results)
    embedded = [t for call in sim.calls for t in call]
    assert sorted(embedded) == sorted(set(texts))


def test_output_checks() -> None:
    assert as_unit_rows([[3.0, 4.0]], 1, "x").tolist() == [[pytest.approx(0.6), pytest.approx(0.8)]]
    with pytest.raises(BackendError, match="x: expected 2 embedding rows"):
        as_unit_rows([[1.0, 0.0]], 2, "x")
    with pytest.raises(BackendError, match="all zeros"):
        as_unit_rows([[0.0, 0.0]], 1, "x")
    with pytest.raises(BackendError, match="non-finite"):
        as_unit_rows([[np.nan, 1.0]], 1, "x")
