"""Prefill for sampling (``hf.prefill``): message cuts, segment bounds and the prefix memo.

Within one host and configuration a prompt's prefill is the same tensors whatever else is
prefilled with it or memoised before it (the determinism contract's identical draws); against
transformers' own unsplit forward (loaded apart, nothing of lmaudit's installed) it agrees
within the contract's 1e-5 on probabilities.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_hf import chat, make_backend, naive_probs, one_thread, reference_model, tiny_checkpoint  # noqa: E402

from lmaudit.backends.base import SampleRequest  # noqa: E402
from lmaudit.backends.hf import prefill as hf_prefill  # noqa: E402
from lmaudit.backends.hf.backend import HFBackend  # noqa: E402
from lmaudit.backends.hf.prefill import MIN_SEGMENT, PrefillMemo, segment_bounds  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)
TOL = 1e-5  # the determinism contract, on probabilities

#: a template whose generation prompt opens the assistant turn, as Gemma's does
#: (``<start_of_turn>model``); the tiny CHAT_TEMPLATE opens it as ``<start_of_turn>assistant``
OPENS_ASSISTANT = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else m['role'] }} {{ m['content'] }}<end_of_turn>"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model {% endif %}"
)


@pytest.fixture(scope="module", params=["gemma3", "llama"])
def tiny_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp(f"tiny-{request.param}"), request.param)


@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gemma 3 with a sliding window of 8 tokens, shorter than every segment."""
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny-gemma-window"), "gemma3", sliding_window=8)


def _prompt(backend: HFBackend, msgs: tuple[dict[str, str], ...]) -> tuple[list[int], list[int]]:
    """A chat's token ids and its prefill segment bounds, as the backend cuts them."""
    ids = backend.encode(msgs)
    return ids, segment_bounds(backend.message_cuts(msgs, ids), len(ids))


def _assert_same_prefill(got: tuple[Any, Any], ref: tuple[Any, Any]) -> None:
    """Bitwise the same logits and KV cache."""
    assert torch.equal(got[0], ref[0])
    assert len(got[1].layers) == len(ref[1].layers)
    for a, b in zip(got[1].layers, ref[1].layers, strict=True):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def _distance_to_naive(logits: Any, reference: Any, ids: list[int]) -> float:
    return float((torch.softmax(logits.double(), -1) - naive_probs(reference, ids)).abs().max())


# ----------------------------------------------------------------------------- cuts


def test_segment_bounds_by_hand() -> None:
    assert segment_bounds([], 5) == [5]
    assert segment_bounds([20, 40, 45, 70], 80, min_segment=16) == [20, 40, 70, 80]  # 45 is 5 after 40
    # 3: too short; 0, 100, 120: outside
    assert segment_bounds([0, 3, 30, 100, 120], 100, min_segment=16) == [30, 100]
    assert segment_bounds([30, 10, 30], 60, min_segment=1) == [10, 30, 60]  # sorted, distinct
    assert segment_bounds([70], 75, min_segment=16) == [70, 75]  # the last segment may be short
    with pytest.raises(ValueError, match="empty"):
        segment_bounds([], 0)


@pytest.mark.parametrize("template", [None, OPENS_ASSISTANT], ids=["tiny-template", "opens-assistant"])
def test_message_cuts_are_token_prefixes_of_the_prompt(tiny_dir: Path, template: str | None) -> None:
    """A cut before each message; before an assistant turn, after its opening where the
    generation prompt renders that opening (else before the turn)."""
    backend = make_backend(tiny_dir, **({"chat_template": template} if template else {}))
    msgs = chat(3, seed=1)
    ids = backend.encode(msgs)
    cuts = backend.message_cuts(msgs, ids)
    assert len(cuts) == len(msgs) - 1 and cuts == sorted(cuts)
    opened = 0
    for k, cut in enumerate(cuts, start=1):
        plain = backend._encode_texts([backend.render(msgs[:k], generation_prompt=False)])[0]
        header = backend._encode_texts([backend.render(msgs[:k], generation_prompt=True)])[0]
        if msgs[k]["role"] == "assistant" and ids[: len(header)] == header:
            opened += 1
            assert ids[:cut] == header and cut > len(plain)
        else:
            assert ids[:cut] == plain
    assert opened == (2 if template else 0)  # both assistant turns open with the generation prompt


# ----------------------------------------------------------------------------- prefill vs naive


@pytest.mark.parametrize("turns", [1, 3])
def test_prefill_by_messages_equals_one_forward(tiny_dir: Path, gemma_dir: Path, turns: int) -> None:
    """Cut at its messages (with a sliding window of 8 < every segment on gemma_dir), a prompt's
    next-token distribution equals transformers' unsplit forward within 1e-5."""
    for path in (tiny_dir, gemma_dir):
        backend = make_backend(path)
        ids, bounds = _prompt(backend, chat(turns, seed=turns))
        # a cut after the system turn and each user turn but the last; the one-letter assistant
        # turns (fewer than MIN_SEGMENT tokens) merge into the user turn after them
        assert len(bounds) == turns + 1 and MIN_SEGMENT > 5
        logits, _ = PrefillMemo().prefill(backend.model, ids, bounds)
        assert _distance_to_naive(logits, reference_model(path), ids) < TOL


def test_a_continued_conversation_computes_only_what_follows_its_first_prompt(tiny_dir: Path) -> None:
    """A position-2 prompt (the position-1 prompt, its answer and the next question) continues
    the position-1 prompt's memoised prefill: only the tokens after it are computed, and its
    logits and draws are bitwise those of a backend that never saw the position-1 prompt."""
    short = chat(2, seed=7)
    long = (*short, {"role": "assistant", "content": "B"}, {"role": "user", "content": "answer the second"})
    first = SampleRequest(short, n=30, temperature=1.0, seed=1, max_tokens=1)
    second = SampleRequest(long, n=30, temperature=1.0, seed=2, max_tokens=1)
    warm = make_backend(tiny_dir, chat_template=OPENS_ASSISTANT)
    warm.sample([first])
    before = warm.prefill_memo.tokens_computed
    texts = warm.sample([second])[0].texts
    short_ids, (long_ids, bounds) = warm.encode(short), _prompt(warm, long)
    assert long_ids[: len(short_ids)] == short_ids and len(short_ids) in bounds
    assert warm.prefill_memo.tokens_computed - before == len(long_ids) - len(short_ids)
    fresh = make_backend(tiny_dir, chat_template=OPENS_ASSISTANT)
    assert fresh.sample([second])[0].texts == texts
    hit = warm.prefill_memo.prefill(warm.model, long_ids, bounds)
    _assert_same_prefill(hit, PrefillMemo(max_bytes=0).prefill(fresh.model, long_ids, bounds))
    assert _distance_to_naive(hit[0], reference_model(tiny_dir), long_ids) < TOL


# ----------------------------------------------------------------------------- the memo


def test_prefill_memo_hit_is_bit_identical_to_recomputing(tiny_dir: Path) -> None:
    """Draws do not depend on what was sampled before: a prompt whose leading messages are
    memoised gets the same logits (bitwise) and draws as in a fresh backend, for less work."""
    short, long = chat(2, seed=5), chat(3, seed=5)
    assert long[: len(short)] == short
    warm = make_backend(tiny_dir)
    sreq = SampleRequest(short, n=40, temperature=1.0, seed=3, max_tokens=1)
    lreq = SampleRequest(long, n=40, temperature=1.0, seed=3, max_tokens=3)
    warm_texts = warm.sample([sreq, lreq])[1].texts
    ids, bounds = _prompt(warm, long)
    memo = warm.prefill_memo
    assert memo.hits == 1 and memo.tokens_computed < len(ids) + len(warm.encode(short))
    fresh = make_backend(tiny_dir)
    assert fresh.sample([lreq])[0].texts == warm_texts
    assert fresh.prefill_memo.tokens_computed == len(ids)
    before = memo.forwards
    hit = memo.prefill(warm.model, ids, bounds)
    assert memo.forwards == before  # the whole prompt memoised with its logits
    _assert_same_prefill(hit, PrefillMemo(max_bytes=0).prefill(fresh.model, ids, bounds))


def test_prefill_memo_serves_only_the_same_segmentation(tiny_dir: Path) -> None:
    """Equal tokens cut differently are different arithmetic: no hit across segmentations."""
    backend = make_backend(tiny_dir)
    ids = backend.encode(chat(2, seed=4))
    memo = PrefillMemo()
    cut, _ = memo.prefill(backend.model, ids, [10, len(ids)])
    whole, _ = memo.prefill(backend.model, ids, [len(ids)])
    assert memo.hits == 0 and memo.tokens_computed == 2 * len(ids)
    assert torch.equal(whole, PrefillMemo().prefill(backend.model, ids, [len(ids)])[0])
    assert float((torch.softmax(cut.double(), -1) - torch.softmax(whole.double(), -1)).abs().max()) < TOL
    again, _ = memo.prefill(backend.model, ids, [10, len(ids)])
    assert memo.hits == 1 and torch.equal(again, cut)
    with pytest.raises(ValueError, match="do not end"):
        memo.prefill(backend.model, ids, [10])


def test_prefill_memo_stays_within_its_byte_bound(tiny_dir: Path) -> None:
    backend = make_backend(tiny_dir)
    ids, bounds = _prompt(backend, chat(3, seed=9))
    whole = PrefillMemo()
    ref = whole.prefill(backend.model, ids, bounds)
    assert len(whole) == len(bounds)
    one = whole.nbytes // len(bounds)  # entries grow with their prefix: room for about two
    small = PrefillMemo(max_bytes=2 * one)
    got = small.prefill(backend.model, ids, bounds)
    _assert_same_prefill(got, ref)
    assert 0 < small.nbytes <= small.max_bytes and len(small) < len(bounds)
    again, _ = small.prefill(backend.model, ids, bounds)
    assert torch.equal(again, ref[0]) and small.hits == 1


def test_prefill_many_gives_each_prompt_its_own_prefill(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prompts prefilled in one call (sharing messages, one repeated, one memoised before, one
    continuing another's last segment) get bitwise the logits and caches of a fresh prefill
    each: every segment not memoised runs once, in a forward of its own, and each prompt's
    head runs on its own row."""
    backend = make_backend(tiny_dir)
    model = backend.model
    short, long, other = (_prompt(backend, chat(t, seed=s)) for t, s in ((2, 5), (3, 5), (2, 6)))
    # a prompt whose last segment is exactly `other` (same tokens, same cuts), then more
    extended = (other[0] + short[0][1:17], [*other[1], len(other[0]) + 16])
    memo = PrefillMemo()
    memo.prefill(model, *short)  # memoised with logits before the call
    heads: list[int] = []
    real = hf_prefill.vocabulary_logits

    def counted(m: Any, hidden: Any) -> Any:
        heads.append(hidden.shape[0])
        return real(m, hidden)

    monkeypatch.setattr(hf_prefill, "vocabulary_logits", counted)
    before, forwards = memo.segments, memo.forwards
    prompts = [long, other, short, extended, other]
    got = memo.prefill_many(model, prompts)
    # segments: long's past the messages it shares with short, other's, extended's last
    shared = 2
    assert long[1][:shared] == short[1][:shared] and long[0][: long[1][1]] == short[0][: short[1][1]]
    assert long[1][shared] != short[1][shared]
    new_segments = (len(long[1]) - shared) + len(other[1]) + 1
    assert memo.segments - before == memo.forwards - forwards == new_segments
    assert heads == [1, 1, 1]  # long, other, extended: one row each
    heads.clear()
    again = memo.prefill_many(model, prompts)  # all memoised now: no forward, no head
    assert memo.segments - before == new_segments and heads == []
    for a, b in zip(again, got, strict=True):
        assert a[0] is b[0] and a[1] is b[1]  # a hit returns the very tensors
    monkeypatch.undo()
    for prompt, result in zip(prompts, got, strict=True):
        _assert_same_prefill(result, PrefillMemo().prefill(model, *prompt))
    assert got[1][0] is got[4][0]  # the repeated prompt computed once
    # `other` after `extended`, in a memo of room for none to a few entries: `other`'s last
    # segment is then memoised without logits (as extended's prefix) or evicted; each prompt
    # still gets its own prefill's tensors, and the memo stays within its bound
    one = PrefillMemo()
    one.prefill(model, *other)
    entry = one.nbytes // len(other[1])
    for room in (0, 1, 2, 4, 100):
        small = PrefillMemo(max_bytes=room * entry)
        for call in ([extended, other], [other, long, extended, other, short]):
            for prompt, result in zip(call, small.prefill_many(model, call), strict=True):
                _assert_same_prefill(result, PrefillMemo().prefill(model, *prompt))
            assert small.nbytes <= small.max_bytes
            assert small.nbytes == sum(size for _, _, size in small._entries.values())
