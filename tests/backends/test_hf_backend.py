"""HFBackend on tiny random transformers models built in the test (no download, no real
checkpoint): identity, gate G1, BOS handling, configuration errors, the cache layer's
streaming, and the embedded model's one-time conversion."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tiny_hf import CHAT_TEMPLATE, make_backend, max_prob_diff, one_thread, qq_requests, tiny_checkpoint  # noqa: E402

from lmaudit.backends.base import LabelRequest, SampleRequest, identity_digest  # noqa: E402
from lmaudit.backends.hf import embedded  # noqa: E402
from lmaudit.backends.hf.backend import HFBackend  # noqa: E402
from lmaudit.backends.hf.prefill import PREFILL_KEY  # noqa: E402
from lmaudit.backends.registry import build_backend  # noqa: E402
from lmaudit.errors import BackendError  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


@pytest.fixture(scope="module", params=["gemma3", "llama"])
def tiny_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp(f"tiny-{request.param}"), request.param)


def _sample_req(**kw: Any) -> SampleRequest:
    msgs = ({"role": "user", "content": "please answer the question"},)
    return SampleRequest(msgs, **{"n": 5, "temperature": 1.0, "seed": 7, **kw})


# ----------------------------------------------------------------------------- gate G1


def test_g1_single_and_multi_token_labels(tiny_dir: Path) -> None:
    backend = make_backend(tiny_dir)
    req = LabelRequest(({"role": "user", "content": "is it true"},), ("A", "Yes", "Zqxv"))
    pieces = backend.check_single_token(req)
    assert len(pieces["A"]) == 1 and len(pieces["Yes"]) == 1
    assert len(pieces["Zqxv"]) > 1
    with pytest.raises(BackendError, match="Zqxv"):
        backend.label_logprobs([req])


def test_g1_reports_a_label_that_merges_with_the_prompt(tiny_dir: Path) -> None:
    backend = make_backend(tiny_dir, chat_template="{{ bos_token }}{{ messages[0]['content'] }}")
    pieces = backend.check_single_token(LabelRequest(({"role": "user", "content": "Ye"},), ("s",)))
    assert pieces["s"][0] == "<merges-with-prompt>"


# ----------------------------------------------------------------------------- identity and config


def test_identity_tracks_what_changes_outputs(tiny_dir: Path) -> None:
    base = make_backend(tiny_dir)
    ident = base.identity
    assert set(ident) >= {"backend", "backend_version", "model", "revision", "dtype", "chat_template_sha256"}
    assert ident["backend"] == "hf" and ident["dtype"] == "float32"
    assert ident["transformers"] == transformers.__version__ and "implementation" not in ident
    assert identity_digest(make_backend(tiny_dir, batch_size=3).identity) == identity_digest(ident)
    other_template = make_backend(tiny_dir, chat_template=CHAT_TEMPLATE + " ")
    assert other_template.chat_template_sha256 != base.chat_template_sha256
    assert identity_digest(other_template.identity) != identity_digest(ident)
    assert identity_digest(make_backend(tiny_dir, dtype="bfloat16").identity) != identity_digest(ident)
    kwargs = make_backend(tiny_dir, chat_template_kwargs={"enable_thinking": False})
    assert identity_digest(kwargs.identity) != identity_digest(ident)
    # the decode block is not identity (label scoring does not use it); it keys multi-token draws
    assert identity_digest(make_backend(tiny_dir, sample_block=4).identity) == identity_digest(ident)
    many, one = _sample_req(max_tokens=4), _sample_req(max_tokens=1)
    assert base.sample_key_extra(many) == {"prefill": PREFILL_KEY, "sample_block": 1}
    assert base.sample_key_extra(one) == {"prefill": PREFILL_KEY}
    assert make_backend(tiny_dir, sample_block=4).sample_key_extra(many) == {
        "prefill": PREFILL_KEY,
        "sample_block": 4,
    }
    # how a run executes is not identity
    assert identity_digest(make_backend(tiny_dir, pack_tokens=7, unit_tokens=9).identity) == identity_digest(
        ident
    )
    desc = base.describe()
    assert desc["bos"]["rendered_prompt_starts_with_bos"] is True
    assert "<end_of_turn>" in desc["stop_tokens"] and desc["prefill"] == PREFILL_KEY
    assert PREFILL_KEY.endswith("/tf5")


def test_bos_is_not_doubled(tiny_dir: Path) -> None:
    backend = make_backend(
        tiny_dir, chat_template="{{ bos_token }}{{ bos_token }}{{ messages[0]['content'] }}"
    )
    ids = backend.encode([{"role": "user", "content": "A"}])
    assert ids[:2] != [backend.tokenizer.bos_token_id] * 2


def test_from_config_and_errors(tiny_dir: Path) -> None:
    backend = HFBackend.from_config(
        {"model": str(tiny_dir), "batch_size": 2, "progress": False, "_target_": "x"}
    )
    assert backend.batch_size == 2
    with pytest.raises(BackendError, match="batchsize"):
        HFBackend.from_config({"model": str(tiny_dir), "batchsize": 2})
    with pytest.raises(BackendError, match="implementation"):  # one implementation: transformers'
        HFBackend.from_config({"model": str(tiny_dir), "implementation": "transformers"})
    with pytest.raises(BackendError, match="pack_tokens"):
        make_backend(tiny_dir, pack_tokens=0)
    with pytest.raises(BackendError, match="dtype"):
        make_backend(tiny_dir, dtype="float64")
    with pytest.raises(BackendError, match="not available offline"):
        HFBackend("lmaudit-test/no-such-model-anywhere")


# ----------------------------------------------------------------------------- the cache layer


def test_the_decode_block_keys_multi_token_draws_only(tiny_dir: Path, tmp_path: Path) -> None:
    from lmaudit.backends.cached import CachedBackend
    from lmaudit.provenance.cache import ResponseCache

    cache = ResponseCache(tmp_path / "cache")
    one = CachedBackend(make_backend(tiny_dir), cache, progress=False)
    one.sample([_sample_req(max_tokens=1), _sample_req(max_tokens=4)])
    four = CachedBackend(make_backend(tiny_dir, sample_block=4), cache, progress=False)
    four.sample([_sample_req(max_tokens=1)])
    assert cache.stats.writes == 10  # 2 requests x 5 draws; the single-token draws were shared
    four.sample([_sample_req(max_tokens=4)])
    assert cache.stats.writes == 15  # multi-token draws under another block are not taken from cache


def test_cached_scoring_streams_all_requests_into_one_trie(tiny_dir: Path, tmp_path: Path) -> None:
    from lmaudit.backends.cached import CachedBackend
    from lmaudit.provenance.cache import ResponseCache

    requests = qq_requests(3)
    direct = make_backend(tiny_dir).label_logprobs(requests, top_k=3)
    backend = make_backend(tiny_dir, pack_tokens=4096)
    cache = ResponseCache(tmp_path / "cache")
    cached = CachedBackend(backend, cache, batch_size=2, progress=False)  # batch_size: not a trie cut
    got = cached.label_logprobs(requests, top_k=3)
    assert backend.stats.forward_calls == 1 and cache.stats.writes == len(requests)
    assert max_prob_diff(got, direct) < 1e-5  # another packing: the contract's tolerance
    again = CachedBackend(backend, cache, batch_size=2, progress=False).label_logprobs(requests, top_k=3)
    assert [a.to_json() for a in again] == [g.to_json() for g in got] and backend.stats.forward_calls == 1


def test_build_hf_backend_in_process(tiny_dir: Path) -> None:
    """A plain model config builds the in-process backend, without its own progress bar (the
    cache layer draws one); unknown keys are still an error."""
    backend = build_backend({"backend": "hf", "model": str(tiny_dir), "runner": "inprocess", "top_k": 3})
    assert isinstance(backend, HFBackend) and backend.top_k == 3 and backend.progress is False
    with pytest.raises(BackendError, match="nope"):
        build_backend({"backend": "hf", "model": str(tiny_dir), "nope": 1})


# ----------------------------------------------------------------------------- the embedded model


def test_ensure_embedded_model_converts_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []

    def fake_convert(gguf: Path, out_dir: Path, marker: dict[str, Any]) -> None:
        calls.append(out_dir)
        (out_dir / embedded.MARKER_FILENAME).write_text(json.dumps(marker))

    def fake_assemble(model_dir: Path) -> Path:
        (model_dir / embedded.GGUF_FILENAME).write_bytes(b"GGUF")
        return model_dir / embedded.GGUF_FILENAME

    monkeypatch.setattr(embedded, "_convert", fake_convert)
    monkeypatch.setattr(embedded, "_assemble_gguf_unlocked", fake_assemble)
    monkeypatch.setenv("LMAUDIT_MODEL_DIR", str(tmp_path / "models"))
    first = embedded.ensure_embedded_model()
    assert first == tmp_path / "models" / "gemma3-270m" / embedded.CONVERTED_SUBDIR and first.is_dir()
    assert embedded.ensure_embedded_model() == first and len(calls) == 1
    marker = json.loads((first / embedded.MARKER_FILENAME).read_text())
    marker["transformers"] = "0.0.1"  # converted by another transformers version: redo
    (first / embedded.MARKER_FILENAME).write_text(json.dumps(marker))
    assert embedded.ensure_embedded_model() == first and len(calls) == 2
    assert not [p for p in first.parent.iterdir() if p.name.startswith(".transformers-")]


def test_ensure_embedded_model_is_safe_under_concurrency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    calls: list[int] = []

    def slow_convert(gguf: Path, out_dir: Path, marker: dict[str, Any]) -> None:
        calls.append(1)
        time.sleep(0.3)
        (out_dir / embedded.MARKER_FILENAME).write_text(json.dumps(marker))

    monkeypatch.setattr(embedded, "_convert", slow_convert)
    monkeypatch.setattr(embedded, "_assemble_gguf_unlocked", lambda d: d / embedded.GGUF_FILENAME)
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(embedded.ensure_embedded_model(tmp_path)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(results)) == 1 and len(results) == 3
