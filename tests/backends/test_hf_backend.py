"""HFBackend on tiny random models built in the test (no download, no real checkpoint).

Reference for every scoring check: a naive forward of one prompt at a time over the full
sequence (no padding, no cache reuse, no ``logits_to_keep``), softmaxed in float64.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from tiny_hf import CHAT_TEMPLATE, WORDS, one_thread, qq_requests, tiny_spm_meta, write_model, write_tokenizer  # noqa: E402

from lmaudit.backends import (  # noqa: E402
    embedded,
    gemma3,
    hf_heads,
    hf_prefill,
    hf_sampling,
)
from lmaudit.backends.base import BackendError, LabelRequest, SampleRequest, identity_digest  # noqa: E402
from lmaudit.backends.hf import HFBackend  # noqa: E402
from lmaudit.backends.hf_attention import plan_blocks, supports_packed_attention  # noqa: E402
from lmaudit.backends.hf_batching import ForwardStats, next_token_logits  # noqa: E402
from lmaudit.backends.hf_prefill import MIN_SEGMENT, PREFILL_KEY, PrefillMemo, segment_bounds  # noqa: E402
from lmaudit.backends.hf_sampling import kv_bytes_per_token, sample_groups  # noqa: E402
from lmaudit.backends.hf_trie import build_prefix_tree, pack_forest, scoring_units  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


#: checkpoints whose backends the tests build with transformers' implementation (by path):
#: every Gemma 3 test runs both on lmaudit's own Gemma 3 (the default) and on transformers'
_TRANSFORMERS: set[Path] = set()


@pytest.fixture(scope="module", params=["gemma3", "gemma3-transformers", "llama"])
def tiny_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp(f"tiny-{request.param}")
    tok = write_tokenizer(path)
    write_model(path, request.param.removesuffix("-transformers"), len(tok))
    if request.param.endswith("-transformers"):
        _TRANSFORMERS.add(path)
    return path


@pytest.fixture(scope="module", params=["lmaudit", "transformers"])
def gemma_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp(f"tiny-gemma-window-{request.param}")
    tok = write_tokenizer(path)
    write_model(path, "gemma3", len(tok), sliding_window=8)
    if request.param == "transformers":
        _TRANSFORMERS.add(path)
    return path


def _backend(path: Path, **kw: Any) -> HFBackend:
    kw.setdefault("progress", False)
    if path in _TRANSFORMERS:
        kw.setdefault("implementation", "transformers")
    return HFBackend(str(path), **kw)


def _naive_probs(backend: HFBackend, req: LabelRequest) -> Any:
    ids = backend.encode(req.messages)
    with torch.inference_mode():
        logits = backend.model(input_ids=torch.tensor([ids])).logits[0, -1]
    return torch.softmax(logits.double(), dim=-1)


# ----------------------------------------------------------------------------- scoring


def _worst_vs_naive(backend: HFBackend, requests: list[LabelRequest], results: list[Any]) -> float:
    worst = 0.0
    for req, res in zip(requests, results, strict=True):
        ref = _naive_probs(backend, req)
        for label, tid in res.label_token_ids.items():
            worst = max(worst, abs(res.probs[label] - float(ref[tid])))
        ref_top = torch.topk(ref, len(res.top_k))
        worst = max(
            worst, max(abs(p - float(v)) for (_, p), v in zip(res.top_k, ref_top.values, strict=True))
        )
    return worst


@pytest.mark.parametrize("pack_tokens", [1, 7, 64, 4096])
def test_packed_prefix_reuse_equals_naive(tiny_dir: Path, pack_tokens: int) -> None:
    backend = _backend(tiny_dir, pack_tokens=pack_tokens)
    requests = qq_requests() + qq_requests(2, system=False)
    requests.append(LabelRequest(({"role": "user", "content": "A"},), ("A", "B")))
    requests.append(requests[3])  # a duplicate prompt: one node, two requests
    results = backend.label_logprobs(requests, top_k=5)
    assert _worst_vs_naive(backend, requests, results) < 1e-5
    ids = [backend.encode(r.messages) for r in requests]
    forest = pack_forest(ids)
    stats = backend.stats
    # each token of the trie is run exactly once, without padding
    assert stats.tokens_real == stats.tokens_padded == len(forest.tokens) < 0.6 * sum(map(len, ids))
    assert len({tuple(i) for i in ids}) == len(ids) - 1 and stats.requests == len(requests)
    assert stats.forward_calls == -(-len(forest.tokens) // pack_tokens)


def test_scoring_units_are_equal_cuts_of_the_sorted_trie() -> None:
    """k = ceil(T / unit_tokens) units of the sorted prompts, each about T / k trie tokens (a
    prompt adds the tokens past its common prefix with the prompt before it), worked by hand."""
    rng = random.Random(3)
    for _ in range(50):
        stems = [[rng.randrange(1, 6) for _ in range(rng.randrange(1, 8))] for _ in range(4)]
        ids = [
            [*rng.choice(stems), *(rng.randrange(1, 9) for _ in range(rng.randrange(1, 6)))]
            for _ in range(40)
        ]
        ids += [list(ids[rng.randrange(40)]) for _ in range(5)]  # duplicates
        unit_tokens = rng.choice([1, 5, 20, 60, 1000])
        units = scoring_units(ids, unit_tokens)
        order = sorted(range(len(ids)), key=lambda i: (ids[i], i))
        assert [i for u in units for i in u] == order and all(units)

        def common(a: list[int], b: list[int]) -> int:
            k = 0
            while k < min(len(a), len(b)) and a[k] == b[k]:
                k += 1
            return k

        added = {order[0]: len(ids[order[0]])}
        added.update({b: len(ids[b]) - common(ids[a], ids[b]) for a, b in itertools.pairwise(order)})
        total = sum(added.values())
        k = -(-total // unit_tokens)
        assert len(units) <= k and (len(units) == k or max(added.values()) * k > total)
        for u in units:
            assert abs(sum(added[i] for i in u) - total / k) <= max(added.values())
    assert scoring_units([], 10) == []


def test_a_unit_scores_the_same_bits_alone_and_in_company(tiny_dir: Path) -> None:
    backend = _backend(tiny_dir)
    requests = qq_requests(4) + qq_requests(2, system=False)
    ids = [backend.encode(r.messages) for r in requests]
    units = scoring_units(ids, 60)
    assert len(units) >= 4
    whole: dict[int, Any] = {}
    for idx, logits in next_token_logits(
        backend.model, ids, stats=ForwardStats(), pack_tokens=16, unit_tokens=60
    ):
        whole.update(zip(idx, logits, strict=True))
    stats = ForwardStats()
    for unit in units[1:3]:  # as a Lightning rank scores the units it is given: each as one unit
        for idx, logits in next_token_logits(
            backend.model, [ids[i] for i in unit], stats=stats, pack_tokens=16, unit_tokens=None
        ):
            assert not logits.requires_grad  # scored under inference mode: no autograd graph
            for j, row in zip(idx, logits, strict=True):
                assert torch.equal(row, whole[unit[j]])
    assert stats.requests == len(units[1]) + len(units[2])


def test_pack_forest_is_a_depth_first_trie() -> None:
    p1 = list(range(1, 21))
    ids = [[*p1, 50, 7, 8], p1, [*p1, 51, 7, 8], [99, 1, 2], [*p1, 50, 7, 9], [99, 1, 2]]
    forest = pack_forest(ids)
    assert len(forest.tokens) == 20 + 2 + 1 + 1 + 3 + 3 == len(forest.positions)  # shared once
    for n, parent in enumerate(
        forest.parent
    ):  # a parent's segment comes first and ends where its child starts
        if parent >= 0:
            assert forest.first[parent] < forest.first[n] < forest.sub_end[parent]
            assert (
                forest.positions[forest.first[n]]
                == forest.positions[forest.first[parent]] + forest.length[parent]
            )
    for n in range(len(forest.first)):  # the tokens of every path are the prompt's tokens
        for i in forest.ends[n]:
            path, m = [], n
            while m >= 0:
                path = forest.tokens[forest.first[m] : forest.first[m] + forest.length[m]] + path
                m = forest.parent[m]
            assert path == ids[i]
    assert sorted(i for e in forest.ends for i in e) == list(range(6))


def test_full_distribution_equals_naive(tiny_dir: Path) -> None:
    backend = _backend(tiny_dir)
    requests = qq_requests(3)
    ids = [backend.encode(r.messages) for r in requests]
    got: dict[int, Any] = {}
    for idx, logits in next_token_logits(backend.model, ids, stats=ForwardStats(), pack_tokens=16):
        got.update(zip(idx, logits, strict=True))
    assert sorted(got) == list(range(len(requests)))
    for i, req in enumerate(requests):
        diff = (torch.softmax(got[i].double(), -1) - _naive_probs(backend, req)).abs().max()
        assert float(diff) < 1e-5


@pytest.mark.parametrize(
    "layer_types",
    [
        ("sliding_attention", "full_attention"),
        ("full_attention", "sliding_attention"),
        ("sliding_attention", "full_attention", "sliding_attention"),
    ],
)
@pytest.mark.parametrize("implementation", ["lmaudit", "transformers"])
def test_last_layer_at_prompt_ends_only_equals_naive(
    tmp_path: Path, layer_types: tuple[str, ...], implementation: str
) -> None:
    """Gemma 3's last layer computed in full only at prompt ends (keys and values everywhere), with
    a sliding window of 8 shorter than the prompts, last layer sliding or full: the naive
    distribution; the model's own layer count and final norm are back afterwards."""
    from lmaudit.backends.hf_last_layer import supports_last_layer_rows

    tok = write_tokenizer(tmp_path)
    write_model(tmp_path, "gemma3", len(tok), sliding_window=8, layer_types=layer_types)
    backend = _backend(tmp_path, implementation=implementation)
    assert supports_last_layer_rows(backend.model)
    norm = backend.model.get_decoder().norm
    requests = qq_requests(3)
    for pack_tokens in (5, 256):
        backend.pack_tokens = pack_tokens
        results = backend.label_logprobs(requests, top_k=5)
        assert _worst_vs_naive(backend, requests, results) < 1e-5
    assert backend.model.config.num_hidden_layers == len(layer_types)
    assert backend.model.get_decoder().norm is norm


def _head_per_unit_vs_own_logits(path: Path, monkeypatch: pytest.MonkeyPatch, softcap: float | None) -> None:
    from lmaudit.backends import hf_batching

    monkeypatch.setattr(hf_heads, "HEAD_BLOCK", 7)  # 160 / 7: a ragged last block
    monkeypatch.setattr(hf_batching, "HEAD_ROWS", 4)
    backend = _backend(path)
    if softcap is not None:
        monkeypatch.setattr(backend.model.config, "final_logit_softcapping", softcap)
    requests = qq_requests(3)
    ids = [backend.encode(r.messages) for r in requests]
    got: dict[int, Any] = {}
    for idx, logits in next_token_logits(backend.model, ids, stats=ForwardStats(), pack_tokens=16):
        assert len(idx) <= 4
        got.update(zip(idx, logits, strict=True))
    assert sorted(got) == list(range(len(requests)))
    for i, seq in enumerate(ids):
        with torch.inference_mode():
            own = backend.model(input_ids=torch.tensor([seq]), logits_to_keep=1).logits[0, -1]
        assert float((got[i] - own).abs().max()) < 1e-4
        if softcap is not None:
            assert float(got[i].abs().max()) <= softcap


def test_the_head_applied_per_unit_equals_the_models_own_logits(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vocabulary head, run apart from the decoder over a unit's prompts in groups of rows and
    blocks of vocabulary rows (both made small here), gives the model's own logits."""
    _head_per_unit_vs_own_logits(tiny_dir, monkeypatch, None)


def test_the_head_applied_per_unit_soft_caps_as_gemma_does(
    gemma_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a final logit soft-cap (a Gemma config field; a cap of 3 bends these random logits
    hard), the head applied per unit still gives the model's own logits."""
    _head_per_unit_vs_own_logits(gemma_dir, monkeypatch, 3.0)


@pytest.mark.parametrize("pack_tokens", [5, 256])
def test_sliding_window_shorter_than_prompts_still_exact(gemma_dir: Path, pack_tokens: int) -> None:
    backend = _backend(gemma_dir, pack_tokens=pack_tokens)
    requests = qq_requests(2)
    ids = [backend.encode(r.messages) for r in requests]
    assert all(len(seq) > 8 for seq in ids)
    assert _worst_vs_naive(backend, requests, backend.label_logprobs(requests)) < 1e-5
    stats = backend.stats
    assert stats.tokens_padded == stats.tokens_real < 0.75 * sum(map(len, ids))  # unpadded, still shared


def test_probs_other_and_top_k(tiny_dir: Path) -> None:
    backend = _backend(tiny_dir, top_k=7)
    res = backend.label_logprobs(qq_requests(1))
    for r in res:
        assert abs(sum(r.probs.values()) + r.other - 1.0) < 1e-12
        assert all(0.0 <= p <= 1.0 for p in r.probs.values()) and r.other >= -1e-12
        assert len(r.top_k) == 7
        assert [p for _, p in r.top_k] == sorted((p for _, p in r.top_k), reverse=True)
        assert set(r.label_token_ids) == {"A", "B"}
    assert backend.label_logprobs([]) == []


def test_bfloat16_scores_close_to_float32(tiny_dir: Path) -> None:
    requests = qq_requests(1)
    full = _backend(tiny_dir).label_logprobs(requests)
    half = _backend(tiny_dir, dtype="bfloat16").label_logprobs(requests)
    for a, b in zip(full, half, strict=True):
        assert all(abs(a.probs[k] - b.probs[k]) < 0.05 for k in a.probs)
        assert abs(sum(b.probs.values()) + b.other - 1.0) < 1e-9


def test_prefix_tree_shape_for_a_qq_cell() -> None:
    p1 = list(range(20))
    ids = [p1, [*p1, 50, *range(60, 75)], [*p1, 51, *range(60, 75)]]
    nodes = build_prefix_tree(ids, sorted(range(3), key=lambda i: ids[i]), min_shared=4)
    assert [(n.start, n.end, n.depth, n.ends) for n in nodes] == [
        (0, 20, 0, [0]),
        (20, 36, 1, [1]),
        (20, 36, 1, [2]),
    ]
    folded = build_prefix_tree(ids, [0, 1, 2], min_shared=100)  # root is always kept
    assert len(folded) == 3 and folded[0].ends == [0]


# ----------------------------------------------------------------------------- gate G1


def test_g1_single_and_multi_token_labels(tiny_dir: Path) -> None:
    backend = _backend(tiny_dir)
    req = LabelRequest(({"role": "user", "content": "is it true"},), ("A", "Yes", "Zqxv"))
    pieces = backend.check_single_token(req)
    assert len(pieces["A"]) == 1 and len(pieces["Yes"]) == 1
    assert len(pieces["Zqxv"]) > 1
    with pytest.raises(BackendError, match="Zqxv"):
        backend.label_logprobs([req])


def test_g1_reports_a_label_that_merges_with_the_prompt(tiny_dir: Path) -> None:
    backend = _backend(tiny_dir, chat_template="{{ bos_token }}{{ messages[0]['content'] }}")
    pieces = backend.check_single_token(LabelRequest(({"role": "user", "content": "Ye"},), ("s",)))
    assert pieces["s"][0] == "<merges-with-prompt>"


# ----------------------------------------------------------------------------- sampling


def _sample_req(**kw: Any) -> SampleRequest:
    msgs = ({"role": "user", "content": "please answer the question"},)
    return SampleRequest(msgs, **{"n": 5, "temperature": 1.0, "seed": 7, **kw})


@pytest.mark.parametrize(("max_tokens", "block"), [(1, 1), (4, 1), (4, 4)])
def test_sampling_draw_i_independent_of_n_and_batch(tiny_dir: Path, max_tokens: int, block: int) -> None:
    backend = _backend(tiny_dir, sample_block=block)
    small = backend.sample([_sample_req(max_tokens=max_tokens)])[0].texts
    other = SampleRequest(({"role": "user", "content": "the economy"},), n=3, max_tokens=max_tokens, seed=1)
    large = backend.sample([other, _sample_req(n=50, max_tokens=max_tokens)])[1].texts
    assert len(small) == 5 and len(large) == 50
    assert large[:5] == small
    assert len(set(large)) > 5  # a random tiny model at T=1 is far from deterministic
    reseeded = backend.sample([_sample_req(n=50, seed=8, max_tokens=max_tokens)])[0].texts
    assert reseeded != large


def test_sampling_greedy_and_top_p(tiny_dir: Path) -> None:
    backend = _backend(tiny_dir)
    greedy = backend.sample([_sample_req(n=6, temperature=0.0, max_tokens=3)])[0].texts
    assert len(set(greedy)) == 1
    nucleus = backend.sample([_sample_req(n=40, top_p=1e-9)])[0].texts
    assert (
        len(set(nucleus)) == 1
        and nucleus[0] == backend.sample([_sample_req(n=1, temperature=0.0)])[0].texts[0]
    )


def _chat(turns: int, seed: int) -> tuple[dict[str, str], ...]:
    """A system turn and ``turns`` user/assistant exchanges of 20-word messages, ending on a user turn."""
    rng = random.Random(seed)
    words = WORDS[4:]
    msgs = [{"role": "system", "content": " ".join(rng.choice(words) for _ in range(20))}]
    for t in range(turns):
        msgs.append({"role": "user", "content": " ".join(rng.choice(words) for _ in range(20))})
        if t < turns - 1:
            msgs.append({"role": "assistant", "content": rng.choice(["A", "B"])})
    return tuple(msgs)


def test_segment_bounds_by_hand() -> None:
    assert segment_bounds([], 5) == [5]
    assert segment_bounds([20, 40, 45, 70], 80, min_segment=16) == [20, 40, 70, 80]  # 45 is 5 after 40
    assert segment_bounds([0, 3, 30, 100, 120], 100, min_segment=16) == [
        30,
        100,
    ]  # 3: too short; 0, 100, 120: outside
    assert segment_bounds([30, 10, 30], 60, min_segment=1) == [10, 30, 60]  # sorted, distinct
    assert segment_bounds([70], 75, min_segment=16) == [70, 75]  # the last segment may be short
    with pytest.raises(ValueError, match="empty"):
        segment_bounds([], 0)


#: a template whose generation prompt opens the assistant turn, as Gemma's does
#: (``<start_of_turn>model``); the tiny CHAT_TEMPLATE opens it as ``<start_of_turn>assistant``
OPENS_ASSISTANT = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else m['role'] }} {{ m['content'] }}<end_of_turn>"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model {% endif %}"
)


@pytest.mark.parametrize("template", [None, OPENS_ASSISTANT], ids=["tiny-template", "opens-assistant"])
def test_message_cuts_are_token_prefixes_of_the_prompt(tiny_dir: Path, template: str | None) -> None:
    """A cut before each message; before an assistant turn, after its opening where the
    generation prompt renders that opening (else before the turn)."""
    backend = _backend(tiny_dir, **({"chat_template": template} if template else {}))
    msgs = _chat(3, seed=1)
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


def test_a_continued_conversation_computes_only_what_follows_its_first_prompt(tiny_dir: Path) -> None:
    """A position-2 prompt (the position-1 prompt, its answer and the next question) continues
    the position-1 prompt's memoised prefill: only the tokens after it are computed, and its
    logits and draws are bitwise those of a backend that never saw the position-1 prompt."""
    short = _chat(2, seed=7)
    long = (*short, {"role": "assistant", "content": "B"}, {"role": "user", "content": "answer the second"})
    first = SampleRequest(short, n=30, temperature=1.0, seed=1, max_tokens=1)
    second = SampleRequest(long, n=30, temperature=1.0, seed=2, max_tokens=1)
    warm = _backend(tiny_dir, chat_template=OPENS_ASSISTANT)
    warm.sample([first])
    before = warm.prefill_memo.tokens_computed
    texts = warm.sample([second])[0].texts
    short_ids, long_ids = warm.encode(short), warm.encode(long)
    assert long_ids[: len(short_ids)] == short_ids
    assert warm.prefill_memo.tokens_computed - before == len(long_ids) - len(short_ids)
    fresh = _backend(tiny_dir, chat_template=OPENS_ASSISTANT)
    assert fresh.sample([second])[0].texts == texts
    bounds = segment_bounds(warm.message_cuts(long, long_ids), len(long_ids))
    assert len(short_ids) in bounds
    a, _ = warm.prefill_memo.prefill(warm.model, long_ids, bounds)
    b, _ = PrefillMemo(max_bytes=0).prefill(fresh.model, long_ids, bounds)
    assert torch.equal(a, b)
    naive = _naive_probs(fresh, LabelRequest(long, ("A", "B")))
    assert float((torch.softmax(a.double(), -1) - naive).abs().max()) < 1e-6


@pytest.mark.parametrize("turns", [1, 3])
def test_prefill_by_messages_equals_one_forward(tiny_dir: Path, gemma_dir: Path, turns: int) -> None:
    """Cut at its messages (with a sliding window of 8 < every segment on gemma_dir), a prompt's
    next-token distribution equals one unsplit forward to float rounding."""
    for path in (tiny_dir, gemma_dir):
        backend = _backend(path)
        msgs = _chat(turns, seed=turns)
        ids = backend.encode(msgs)
        bounds = segment_bounds(backend.message_cuts(msgs, ids), len(ids))
        # a cut after the system turn and each user turn but the last; the one-letter assistant
        # turns (fewer than MIN_SEGMENT tokens) merge into the user turn after them
        assert len(bounds) == turns + 1 and MIN_SEGMENT > 5
        logits, _ = PrefillMemo().prefill(backend.model, ids, bounds)
        naive = _naive_probs(backend, LabelRequest(msgs, ("A", "B")))
        assert float((torch.softmax(logits.double(), -1) - naive).abs().max()) < 1e-6


def test_prefill_memo_hit_is_bit_identical_to_recomputing(tiny_dir: Path) -> None:
    """Draws do not depend on what was sampled before: a prompt whose leading messages are
    memoised gets the same logits (bitwise) and draws as in a fresh backend, for less work."""
    short, long = _chat(2, seed=5), _chat(3, seed=5)
    assert long[: len(short)] == short
    warm = _backend(tiny_dir)
    sreq = SampleRequest(short, n=40, temperature=1.0, seed=3, max_tokens=1)
    lreq = SampleRequest(long, n=40, temperature=1.0, seed=3, max_tokens=3)
    warm_texts = warm.sample([sreq, lreq])[1].texts
    ids = warm.encode(long)
    assert warm.prefill_memo.hits == 1 and warm.prefill_memo.tokens_computed < len(ids) + len(
        warm.encode(short)
    )
    fresh = _backend(tiny_dir)
    assert fresh.sample([lreq])[0].texts == warm_texts
    assert fresh.prefill_memo.tokens_computed - fresh.prefill_memo.checked_tokens == len(ids)
    bounds = segment_bounds(warm.message_cuts(long, ids), len(ids))
    a, _ = warm.prefill_memo.prefill(warm.model, ids, bounds)
    b, _ = PrefillMemo(max_bytes=0).prefill(fresh.model, ids, bounds)  # nothing memoised
    assert torch.equal(a, b)


def test_prefill_memo_serves_only_the_same_segmentation(tiny_dir: Path) -> None:
    """Equal tokens cut differently are different arithmetic: no hit across segmentations."""
    backend = _backend(tiny_dir)
    ids = backend.encode(_chat(2, seed=4))
    memo = PrefillMemo()
    cut, _ = memo.prefill(backend.model, ids, [10, len(ids)])
    whole, _ = memo.prefill(backend.model, ids, [len(ids)])
    assert memo.hits == 0 and memo.tokens_computed - memo.checked_tokens == 2 * len(ids)
    assert torch.equal(whole, PrefillMemo().prefill(backend.model, ids, [len(ids)])[0])
    assert float((cut - whole).abs().max()) < 1e-5
    again, _ = memo.prefill(backend.model, ids, [10, len(ids)])
    assert memo.hits == 1 and torch.equal(again, cut)


def test_prefill_memo_stays_within_its_byte_bound(tiny_dir: Path) -> None:
    backend = _backend(tiny_dir)
    msgs = _chat(3, seed=9)
    ids = backend.encode(msgs)
    bounds = segment_bounds(backend.message_cuts(msgs, ids), len(ids))
    whole = PrefillMemo()
    ref, _ = whole.prefill(backend.model, ids, bounds)
    assert len(whole) == len(bounds)
    one = whole.nbytes // len(bounds)  # entries grow with their prefix: room for about two
    small = PrefillMemo(max_bytes=2 * one)
    got, _ = small.prefill(backend.model, ids, bounds)
    assert torch.equal(got, ref) and 0 < small.nbytes <= small.max_bytes and len(small) < len(bounds)
    again, _ = small.prefill(backend.model, ids, bounds)
    assert torch.equal(again, ref) and small.hits == 1


class _Head(torch.nn.Module):
    """A vocabulary head of Gemma 3's hidden width (640) over a smaller vocabulary, as
    :func:`vocabulary_logits_each` sees a causal LM: its output embedding and its config."""

    def __init__(self, vocab: int, softcap: float | None) -> None:
        super().__init__()
        self.head = torch.nn.Linear(640, vocab, bias=False)
        self.config = type("Config", (), {"final_logit_softcapping": softcap, "hidden_size": 640})()

    def get_output_embeddings(self) -> torch.nn.Linear:
        return self.head


@pytest.mark.parametrize("softcap", [None, 3.0])
@pytest.mark.parametrize("stacked", ["checked", "not exact"])
def test_vocabulary_heads_together_are_each_head_bitwise(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch, softcap: float | None, stacked: str
) -> None:
    """The heads of several prompts taken together give each row exactly its own head, computed
    alone (its row in a product over it and three zero rows, block by block; several blocks, a
    ragged last one, and with soft-capping), and the model's own logits to float rounding; on
    the tiny model and on a head of Gemma 3's width. Where one product over the rows is not
    exact ("not exact": a product that rounds rows differently when it has more than four), the
    rows are computed one by one and the result is the same."""
    real_linear = torch.nn.functional.linear
    assert hf_heads.HEAD_MIN_ROWS == 4

    def alone(row: Any, w: Any) -> Any:  # the reference: the row in a product of four rows
        return real_linear(torch.cat([row, torch.zeros(3, row.shape[1])]), w)[:1]

    for model, block in ((_backend(tiny_dir).model, 7), (_Head(3 * 512 + 100, softcap), 512)):
        monkeypatch.setattr(hf_heads, "HEAD_BLOCK", block)
        monkeypatch.setattr(hf_heads, "_STACKED_EXACT", {})
        monkeypatch.setattr(model.config, "final_logit_softcapping", softcap, raising=False)
        weight = model.get_output_embeddings().weight
        vocab = weight.shape[0]
        assert vocab % block and vocab > 3 * block
        gen = torch.Generator().manual_seed(0)
        for sizes in ((1, 3, 1, 2), (1,), (2, 1)):  # 7 rows; one row and three rows, padded
            hiddens = [torch.randn(n, model.config.hidden_size, generator=gen) for n in sizes]
            if stacked == "not exact":

                def skewed(h: Any, w: Any, b: Any = None) -> Any:
                    out = real_linear(h, w, b)
                    return out if h.shape[0] == 4 else torch.nextafter(out, out + 1)

                monkeypatch.setattr(torch.nn.functional, "linear", skewed)
            together = hf_heads.vocabulary_logits_each(model, hiddens)
            monkeypatch.setattr(torch.nn.functional, "linear", real_linear)
            found = set(hf_heads._STACKED_EXACT.values())
            # "checked": the machine's products decide; either way every row below is its own
            # head bitwise
            if stacked == "not exact" and sum(sizes) > 4:
                assert False in found
            for h, got in zip(hiddens, together, strict=True):
                assert got.shape == (h.shape[0], vocab)
                for i in range(h.shape[0]):
                    row = h[i : i + 1]
                    with torch.no_grad():  # one prompt's head, block by block, as it is computed alone
                        own = torch.cat(
                            [alone(row, weight[a : a + block]) for a in range(0, vocab, block)], 1
                        )
                    own = own if softcap is None else torch.tanh(own / softcap) * softcap
                    assert torch.equal(got[i : i + 1], own)
                    assert torch.equal(got[i : i + 1], hf_heads.vocabulary_logits_each(model, [row])[0])
                with torch.no_grad():
                    ref = real_linear(h, weight)
                ref = ref if softcap is None else torch.tanh(ref / softcap) * softcap
                assert float((got - ref).abs().max()) < 1e-4


def _prompt(backend: HFBackend, msgs: tuple[dict[str, str], ...]) -> tuple[list[int], list[int]]:
    """A chat's token ids and its prefill segment bounds, as the backend cuts them."""
    ids = backend.encode(msgs)
    return ids, segment_bounds(backend.message_cuts(msgs, ids), len(ids))


def test_prefill_many_gives_each_prompt_its_own_prefill(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prompts prefilled in one call (sharing messages, one repeated, one memoised before, one
    continuing another's last segment) get bitwise the logits and caches of a fresh prefill
    each, one forward per segment; every segment runs once, packed into one forward on
    lmaudit's Gemma 3 (and checked to be exact there), and the heads not memoised run in one
    pass."""
    backend = _backend(tiny_dir)
    model = backend.model

    short, long, other = (_prompt(backend, _chat(t, seed=s)) for t, s in ((2, 5), (3, 5), (2, 6)))
    # a prompt whose last segment is exactly `other` (same tokens, same cuts), then more
    extended = (other[0] + short[0][1:17], [*other[1], len(other[0]) + 16])
    memo = PrefillMemo()
    memo.prefill(model, *short)  # memoised with logits before the call
    calls: list[int] = []
    real = hf_prefill.vocabulary_logits_each

    def counted(m: Any, hs: Any) -> Any:
        calls.append(len(hs))
        return real(m, hs)

    monkeypatch.setattr(hf_prefill, "vocabulary_logits_each", counted)
    before, forwards = memo.segments, memo.forwards
    prompts = [long, other, short, extended, other]
    got = memo.prefill_many(model, prompts)
    # segments: long's past the messages it shares with short, other's, extended's last
    shared = 2
    assert long[1][:shared] == short[1][:shared] and long[0][: long[1][1]] == short[0][: short[1][1]]
    assert long[1][shared] != short[1][shared]
    new_segments = (len(long[1]) - shared) + len(other[1]) + 1
    assert memo.segments - before == new_segments
    packs = isinstance(model, gemma3.Gemma3ForCausalLM)
    assert memo.pack is (True if packs else None)
    assert memo.forwards - forwards == (1 if packs else new_segments)
    assert calls == [3]  # long, other, extended: one pass
    monkeypatch.undo()
    for (ids, bounds), (logits, cache) in zip(prompts, got, strict=True):
        ref_logits, ref_cache = PrefillMemo(pack=False).prefill(model, ids, bounds)
        assert torch.equal(logits, ref_logits)
        for a, b in zip(cache.layers, ref_cache.layers, strict=True):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    assert got[1][0].data_ptr() == got[4][0].data_ptr()  # the repeated prompt computed once
    monkeypatch.setattr(hf_prefill, "vocabulary_logits_each", counted)
    again = memo.prefill_many(model, prompts)  # all memoised now: no forward, no head
    assert memo.segments - before == new_segments and calls == [3]
    assert all(torch.equal(a[0], b[0]) for a, b in zip(again, got, strict=True))
    monkeypatch.undo()
    # `other` after `extended`, in a memo of room for none to a few entries: `other`'s last
    # segment is then memoised without logits (as extended's prefix) or evicted; each prompt
    # still gets its own prefill's tensors, and the memo stays within its bound
    one = PrefillMemo()
    one.prefill(model, *other)
    entry = one.nbytes // len(other[1])
    for room in (0, 1, 2, 4, 100):
        small = PrefillMemo(max_bytes=room * entry)
        for call in ([extended, other], [other, long, extended, other, short]):
            for (ids, bounds), (logits, _) in zip(call, small.prefill_many(model, call), strict=True):
                assert torch.equal(logits, PrefillMemo(pack=False).prefill(model, ids, bounds)[0])
            assert small.nbytes <= small.max_bytes
            assert small.nbytes == sum(size for _, _, size in small._entries.values())


def test_a_short_last_segment_is_prefilled_in_a_forward_of_its_own(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt's last segment shorter than PACK_MIN_TOKENS (a prompt that goes on from another by
    a few tokens) is never packed with other segments: on some processors MKL computes a
    product of up to three rows with another kernel, so such a segment's own forward does not
    give the bits of its rows in a larger product. Every prompt still gets bitwise its own
    prefill."""
    from lmaudit.backends.gemma3 import prefill as gemma3_prefill
    from lmaudit.backends.hf_prefill import PACK_MIN_TOKENS

    backend = _backend(tiny_dir)
    model = backend.model

    base, long = _prompt(backend, _chat(2, seed=6)), _prompt(backend, _chat(3, seed=5))
    prompts = [base, (base[0] + long[0][5:8], [*base[1], len(base[0]) + 3]), long]
    packed: list[list[int]] = []
    real = gemma3_prefill.packed_prefill

    def spy(m: Any, segments: Any) -> Any:
        packed.append([len(s.ids) for s in segments])
        return real(m, segments)

    monkeypatch.setattr(gemma3_prefill, "packed_prefill", spy)
    memo = PrefillMemo()
    got = memo.prefill_many(model, prompts)
    monkeypatch.undo()
    if isinstance(model, gemma3.Gemma3ForCausalLM):
        assert packed and all(n >= PACK_MIN_TOKENS for lengths in packed for n in lengths)
    else:
        assert packed == []
    for (ids, bounds), (logits, cache) in zip(prompts, got, strict=True):
        ref_logits, ref_cache = PrefillMemo(pack=False).prefill(model, ids, bounds)
        assert torch.equal(logits, ref_logits)
        for a, b in zip(cache.layers, ref_cache.layers, strict=True):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_packed_prefill_falls_back_where_it_is_not_exact(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where a packed forward differs from one forward per segment in a single bit, the memo
    says so, keeps nothing of it and prefills segment by segment from then on: the draws are
    those of the unpacked path. Other models never pack: one forward per segment, no check."""
    from lmaudit.backends.gemma3 import prefill as gemma3_prefill

    backend = _backend(tiny_dir)
    reqs = [
        SampleRequest(_chat(t, seed=s), n=30, temperature=1.0, seed=s, max_tokens=2)
        for t, s in ((2, 1), (3, 1), (2, 2))
    ]
    if not isinstance(backend.model, gemma3.Gemma3ForCausalLM):  # packing is lmaudit's Gemma 3's
        backend.sample(reqs)
        memo = backend.prefill_memo
        assert memo.pack is None and memo.forwards == memo.segments > len(reqs) and memo.checked_tokens == 0
        return
    real = gemma3_prefill.packed_prefill

    def off_by_one_ulp(model: Any, segments: Any) -> Any:  # every segment's row, one bit off
        return [(torch.nextafter(row, row + 1), cache) for row, cache in real(model, segments)]

    monkeypatch.setattr(gemma3_prefill, "packed_prefill", off_by_one_ulp)
    with caplog.at_level("WARNING", logger="lmaudit.backends.hf_prefill"):
        got = [r.texts for r in backend.sample(reqs)]
    memo = backend.prefill_memo
    assert memo.pack is False and "not bitwise equal" in caplog.text
    # one forward per segment, plus the packed forward that was dropped and the check's
    assert memo.forwards == memo.segments + 2
    monkeypatch.undo()
    # nothing of the dropped forward was kept: every prompt's memoised logits and caches are
    # bitwise those of the unpacked path (a hit now, no forward)
    for req in reqs:
        ids = backend.encode(req.messages)
        bounds = segment_bounds(backend.message_cuts(req.messages, ids), len(ids))
        before = memo.forwards
        logits, cache = memo.prefill(backend.model, ids, bounds)
        ref_logits, ref_cache = PrefillMemo(pack=False).prefill(backend.model, ids, bounds)
        assert memo.forwards == before and torch.equal(logits, ref_logits)
        for a, b in zip(cache.layers, ref_cache.layers, strict=True):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    unpacked = _backend(tiny_dir)
    unpacked.prefill_memo = PrefillMemo(pack=False)
    packed = _backend(tiny_dir)
    assert [r.texts for r in unpacked.sample(reqs)] == got == [r.texts for r in packed.sample(reqs)]
    assert packed.prefill_memo.pack is True and packed.prefill_memo.forwards < packed.prefill_memo.segments


def test_sample_groups_by_hand() -> None:
    """Groups of consecutive prompts: at most max_prompts, at most max_bytes of KV cache and
    logits (10 bytes a token, 5 of logits here) unless one prompt takes more on its own."""
    assert sample_groups([], 10, 5) == []
    assert sample_groups([1] * 5, 10, 5, max_prompts=2, max_bytes=10**6) == [(0, 2), (2, 4), (4, 5)]
    # costs 15, 25, 105, 15, 15: 15 + 25 <= 40; 105 alone (over the bound on its own); 15 + 15
    assert sample_groups([1, 2, 10, 1, 1], 10, 5, max_prompts=16, max_bytes=40) == [(0, 2), (2, 3), (3, 5)]
    assert sample_groups([3, 1], 10, 5, max_prompts=16, max_bytes=50) == [(0, 2)]  # 35 + 15 = 50: fits
    assert sample_groups([3, 1], 10, 5, max_prompts=16, max_bytes=49) == [(0, 1), (1, 2)]


def test_sample_groups_keep_draws_and_bound_memory(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests cut into groups of one prompt's worth of bytes draw what one group of all draws."""
    backend = _backend(tiny_dir)
    reqs = [SampleRequest(_chat(2, seed=s), n=20, temperature=1.0, seed=s, max_tokens=2) for s in range(5)]
    whole = [r.texts for r in backend.sample(reqs)]
    seen: list[int] = []
    real = HFBackend._sample_group

    def spy(self: HFBackend, requests: Any, ids: Any, bar: Any) -> Any:
        seen.append(len(requests))
        return real(self, requests, ids, bar)

    monkeypatch.setattr(hf_sampling, "SAMPLE_GROUP_BYTES", 1)
    monkeypatch.setattr(HFBackend, "_sample_group", spy)
    fresh = _backend(tiny_dir)
    assert [r.texts for r in fresh.sample(reqs)] == whole and seen == [1] * 5
    assert kv_bytes_per_token(backend.model) > 0


# ----------------------------------------------------------------------------- identity and config


def test_identity_tracks_what_changes_outputs(tiny_dir: Path) -> None:
    base = _backend(tiny_dir)
    ident = base.identity
    assert set(ident) >= {"backend", "backend_version", "model", "revision", "dtype", "chat_template_sha256"}
    assert ident["backend"] == "hf" and ident["dtype"] == "float32"
    assert identity_digest(_backend(tiny_dir, batch_size=3).identity) == identity_digest(ident)
    other_template = _backend(tiny_dir, chat_template=CHAT_TEMPLATE + " ")
    assert other_template.chat_template_sha256 != base.chat_template_sha256
    assert identity_digest(other_template.identity) != identity_digest(ident)
    assert identity_digest(_backend(tiny_dir, dtype="bfloat16").identity) != identity_digest(ident)
    kwargs = _backend(tiny_dir, chat_template_kwargs={"enable_thinking": False})
    assert identity_digest(kwargs.identity) != identity_digest(ident)
    # the decode block is not identity (label scoring does not use it); it keys multi-token draws
    assert identity_digest(_backend(tiny_dir, sample_block=4).identity) == identity_digest(ident)
    many, one = _sample_req(max_tokens=4), _sample_req(max_tokens=1)
    assert base.sample_key_extra(many) == {"prefill": PREFILL_KEY, "sample_block": 1}
    assert base.sample_key_extra(one) == {"prefill": PREFILL_KEY}
    assert _backend(tiny_dir, sample_block=4).sample_key_extra(many) == {
        "prefill": PREFILL_KEY,
        "sample_block": 4,
    }
    desc = base.describe()
    assert desc["bos"]["rendered_prompt_starts_with_bos"] is True
    assert "<end_of_turn>" in desc["stop_tokens"]


def test_bos_is_not_doubled(tiny_dir: Path) -> None:
    backend = _backend(tiny_dir, chat_template="{{ bos_token }}{{ bos_token }}{{ messages[0]['content'] }}")
    ids = backend.encode([{"role": "user", "content": "A"}])
    assert ids[:2] != [backend.tokenizer.bos_token_id] * 2


def test_from_config_and_errors(tiny_dir: Path) -> None:
    backend = HFBackend.from_config(
        {"model": str(tiny_dir), "batch_size": 2, "progress": False, "_target_": "x"}
    )
    assert backend.batch_size == 2
    with pytest.raises(BackendError, match="batchsize"):
        HFBackend.from_config({"model": str(tiny_dir), "batchsize": 2})
    with pytest.raises(BackendError, match="dtype"):
        _backend(tiny_dir, dtype="float64")
    with pytest.raises(BackendError, match="not available offline"):
        HFBackend("lmaudit-test/no-such-model-anywhere")


# ----------------------------------------------------------------------------- embedded helpers


def test_read_gguf_metadata_matches_gguf_writer(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "t.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.name", "tiny")
    writer.add_uint32("tokenizer.ggml.bos_token_id", 2)
    writer.add_bool("tokenizer.ggml.add_bos_token", True)
    writer.add_token_list(["<pad>", "a b", "▁x"])
    writer.add_token_scores([0.0, -1.5, -2.25])
    writer.add_token_types([3, 4, 1])
    writer.add_tensor("w", torch.zeros(4).numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    meta = embedded.read_gguf_metadata(path)
    assert meta["general.name"] == "tiny" and meta["tokenizer.ggml.bos_token_id"] == 2
    assert meta["tokenizer.ggml.add_bos_token"] == 1
    assert meta["tokenizer.ggml.tokens"] == ["<pad>", "a b", "▁x"]
    assert meta["tokenizer.ggml.scores"].tolist() == [0.0, -1.5, -2.25]
    assert meta["tokenizer.ggml.token_type"].tolist() == [3, 4, 1]


def test_rebuilt_gemma_tokenizer_matches_sentencepiece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spm = pytest.importorskip("sentencepiece")
    meta = tiny_spm_meta()
    monkeypatch.setattr(embedded, "read_gguf_metadata", lambda path: meta)
    fast = embedded.build_gemma3_tokenizer(tmp_path / "unused.gguf", tmp_path)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "tokenizer.model"))
    texts = ["the user is in the inn", "there  then", "a ?B.", "Zürich é", "thing\nthe", "  the  "]
    for text in texts:
        assert fast(text, add_special_tokens=False)["input_ids"] == sp.encode(text), text
    ids = fast("<start_of_turn>user\n", add_special_tokens=False)["input_ids"]
    assert fast.convert_ids_to_tokens(ids) == ["<start_of_turn>", "us", "er", "\n"]
    assert fast.decode(ids, skip_special_tokens=True) == "user\n"


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
    assert first == tmp_path / "models" / embedded.CONVERTED_SUBDIR and first.is_dir()
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


def test_the_decode_block_keys_multi_token_draws_only(tiny_dir: Path, tmp_path: Path) -> None:
    from lmaudit.backends.cached import CachedBackend
    from lmaudit.provenance.cache import ResponseCache

    cache = ResponseCache(tmp_path / "cache")
    one = CachedBackend(_backend(tiny_dir), cache, progress=False)
    one.sample([_sample_req(max_tokens=1), _sample_req(max_tokens=4)])
    four = CachedBackend(_backend(tiny_dir, sample_block=4), cache, progress=False)
    four.sample([_sample_req(max_tokens=1)])
    assert cache.stats.writes == 10  # 2 requests x 5 draws; the single-token draws were shared
    four.sample([_sample_req(max_tokens=4)])
    assert cache.stats.writes == 15  # multi-token draws under another block are not taken from cache


def test_cached_scoring_streams_all_requests_into_one_trie(tiny_dir: Path, tmp_path: Path) -> None:
    from lmaudit.backends.cached import CachedBackend
    from lmaudit.provenance.cache import ResponseCache

    requests = qq_requests(3)
    direct = _backend(tiny_dir).label_logprobs(requests, top_k=3)
    backend = _backend(tiny_dir, pack_tokens=4096)
    cache = ResponseCache(tmp_path / "cache")
    cached = CachedBackend(backend, cache, batch_size=2, progress=False)  # batch_size: not a trie cut
    got = cached.label_logprobs(requests, top_k=3)
    assert backend.stats.forward_calls == 1 and cache.stats.writes == len(requests)
    assert [g.probs for g in got] == [d.probs for d in direct]
    again = CachedBackend(backend, cache, batch_size=2, progress=False).label_logprobs(requests, top_k=3)
    assert [a.to_json() for a in again] == [g.to_json() for g in got] and backend.stats.forward_calls == 1


def test_plan_blocks_cover_every_query_and_its_visible_keys() -> None:
    rng = random.Random(5)
    for _ in range(30):
        nodes = sorted(rng.randrange(6) for _ in range(rng.randrange(1, 40)))
        n_q, n_k = len(nodes), len(nodes) + rng.randrange(0, 30)
        visible = torch.rand(n_q, n_k) < 0.3
        for q in range(1, n_q):  # a node's later tokens see what its earlier ones see
            if nodes[q] == nodes[q - 1]:
                visible[q] |= visible[q - 1]
        plan = plan_blocks(nodes, visible)
        assert plan[0][0] == 0 and plan[-1][1] == n_q
        assert all(a[1] == b[0] for a, b in itertools.pairwise(plan))  # consecutive, no gaps
        for q0, q1, keys in plan:
            assert torch.equal(keys, torch.unique(keys))  # sorted, once each
            outside = torch.ones(n_k, dtype=torch.bool)
            outside[keys] = False
            assert not visible[q0:q1][:, outside].any()  # nothing visible is left out


def test_block_attention_equals_dense_and_restores_the_model(gemma_dir: Path) -> None:
    backend = _backend(gemma_dir)
    model = backend.model
    assert supports_packed_attention(model)
    before = model.config._attn_implementation
    requests = qq_requests(4) + qq_requests(2, system=False)
    ids = [backend.encode(r.messages) for r in requests]
    got: dict[str, dict[int, Any]] = {"blocks": {}, "dense": {}}
    for how in got:
        for idx, logits in next_token_logits(
            model, ids, stats=ForwardStats(), pack_tokens=24, block_attention=how == "blocks"
        ):
            got[how].update(zip(idx, logits, strict=True))
    assert model.config._attn_implementation == before
    assert sorted(got["blocks"]) == list(range(len(ids)))
    for i in got["dense"]:
        p_blocks = torch.softmax(got["blocks"][i].double(), -1)
        p_dense = torch.softmax(got["dense"][i].double(), -1)
        assert float((p_blocks - p_dense).abs().max()) < 1e-6
