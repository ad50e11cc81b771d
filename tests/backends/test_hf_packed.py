"""Packed prefix-trie label scoring (``hf.packed``) on tiny random Gemma 3 and Llama models.

The reference of every scoring check is transformers' own model, loaded apart from the
backend (nothing of lmaudit's installed), run on one prompt at a time over the whole sequence
and softmaxed in float64 (:func:`tiny_hf.naive_probs`); fresh probabilities agree with it
within the determinism contract's 1e-5.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_hf import (  # noqa: E402
    make_backend,
    naive_probs,
    one_thread,
    qq_requests,
    reference_model,
    tiny_checkpoint,
    worst_vs_naive,
)

from lmaudit.backends.base import LabelRequest  # noqa: E402
from lmaudit.backends.hf.packed import forward as packed_forward  # noqa: E402
from lmaudit.backends.hf.packed.forward import ForwardStats, next_token_logits  # noqa: E402
from lmaudit.backends.hf.packed.trie import build_prefix_tree, pack_forest, scoring_units  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)
TOL = 1e-5  # the determinism contract, on probabilities


@pytest.fixture(scope="module", params=["gemma3", "llama"])
def tiny_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp(f"tiny-{request.param}"), request.param)


@pytest.fixture(scope="module")
def tiny_ref(tiny_dir: Path) -> Any:
    return reference_model(tiny_dir)


@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gemma 3 with a sliding window of 8 tokens, shorter than every prompt."""
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny-gemma-window"), "gemma3", sliding_window=8)


def _logits_by_request(model: Any, ids: list[list[int]], **kw: Any) -> dict[int, Any]:
    got: dict[int, Any] = {}
    for idx, logits in next_token_logits(model, ids, stats=ForwardStats(), **kw):
        assert not set(idx) & set(got)  # every request once
        got.update(zip(idx, logits, strict=True))
    assert sorted(got) == list(range(len(ids)))
    return got


# ----------------------------------------------------------------------------- the trie


def test_pack_forest_is_a_depth_first_trie() -> None:
    p1 = list(range(1, 21))
    ids = [[*p1, 50, 7, 8], p1, [*p1, 51, 7, 8], [99, 1, 2], [*p1, 50, 7, 9], [99, 1, 2]]
    forest = pack_forest(ids)
    assert len(forest.tokens) == 20 + 2 + 1 + 1 + 3 + 3 == len(forest.positions)  # shared once
    for n, parent in enumerate(forest.parent):
        if parent >= 0:  # a parent's segment comes first and ends where its child starts
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
    with pytest.raises(ValueError, match="empty"):
        pack_forest([[1, 2], []])


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


# ----------------------------------------------------------------------------- packed scoring vs naive


@pytest.mark.parametrize("pack_tokens", [1, 7, 64, 4096])
def test_packed_prefix_reuse_equals_naive(tiny_dir: Path, tiny_ref: Any, pack_tokens: int) -> None:
    backend = make_backend(tiny_dir, pack_tokens=pack_tokens)
    requests = qq_requests() + qq_requests(2, system=False)
    requests.append(LabelRequest(({"role": "user", "content": "A"},), ("A", "B")))
    requests.append(requests[3])  # a duplicate prompt: one node, two requests
    results = backend.label_logprobs(requests, top_k=5)
    assert worst_vs_naive(backend, tiny_ref, requests, results) < TOL
    ids = [backend.encode(r.messages) for r in requests]
    forest = pack_forest(ids)
    stats = backend.stats
    # each token of the trie is run exactly once, without padding
    assert stats.tokens_real == stats.tokens_padded == len(forest.tokens) < 0.6 * sum(map(len, ids))
    assert len({tuple(i) for i in ids}) == len(ids) - 1 and stats.requests == len(requests)
    assert stats.forward_calls == -(-len(forest.tokens) // pack_tokens)


def test_full_distribution_equals_naive(tiny_dir: Path, tiny_ref: Any) -> None:
    backend = make_backend(tiny_dir)
    ids = [backend.encode(r.messages) for r in qq_requests(3)]
    got = _logits_by_request(backend.model, ids, pack_tokens=16, unit_tokens=40)
    for i, seq in enumerate(ids):
        diff = (torch.softmax(got[i].double(), -1) - naive_probs(tiny_ref, seq)).abs().max()
        assert float(diff) < TOL


@pytest.mark.parametrize(
    "layer_types",
    [
        ("sliding_attention", "full_attention"),
        ("full_attention", "sliding_attention"),
        ("sliding_attention", "full_attention", "sliding_attention"),
        ("full_attention", "full_attention"),
    ],
)
@pytest.mark.parametrize("pack_tokens", [5, 256])
def test_sliding_window_shorter_than_prompts_equals_naive(
    tmp_path: Path, layer_types: tuple[str, ...], pack_tokens: int
) -> None:
    """Gemma 3 with a sliding window of 8 tokens, shorter than every prompt, in any order of
    layer types: the packed masks drop what the window drops (the naive forward's own sliding
    masks are the reference), and the trie is still shared and unpadded."""
    path = tiny_checkpoint(tmp_path, "gemma3", sliding_window=8, layer_types=layer_types)
    backend = make_backend(path, pack_tokens=pack_tokens)
    requests = qq_requests(3)
    ids = [backend.encode(r.messages) for r in requests]
    assert all(len(seq) > 8 for seq in ids)
    results = backend.label_logprobs(requests, top_k=5)
    assert worst_vs_naive(backend, reference_model(path), requests, results) < TOL
    stats = backend.stats
    assert stats.tokens_padded == stats.tokens_real < 0.75 * sum(map(len, ids))


def test_the_window_binds(gemma_dir: Path) -> None:
    """The window of gemma_dir changes these prompts' distributions (so the sliding-window tests
    above test something): the same weights with a window longer than every prompt differ."""
    from transformers import AutoModelForCausalLM

    wide = AutoModelForCausalLM.from_pretrained(str(gemma_dir), sliding_window=512).eval()
    narrow = reference_model(gemma_dir)
    backend = make_backend(gemma_dir)
    seq = backend.encode(qq_requests(1)[1].messages)
    assert float((naive_probs(wide, seq) - naive_probs(narrow, seq)).abs().max()) > 1e-3


def test_a_unit_scores_alike_alone_and_in_company(tiny_dir: Path) -> None:
    """A unit scored as a Lightning rank scores the units it is given (each as one unit) gives
    the distributions it gives among all the units of a call, within 1e-5."""
    backend = make_backend(tiny_dir)
    requests = qq_requests(4) + qq_requests(2, system=False)
    ids = [backend.encode(r.messages) for r in requests]
    units = scoring_units(ids, 60)
    assert len(units) >= 4
    whole = _logits_by_request(backend.model, ids, pack_tokens=16, unit_tokens=60)
    stats = ForwardStats()
    for unit in units[1:3]:
        for idx, logits in next_token_logits(
            backend.model, [ids[i] for i in unit], stats=stats, pack_tokens=16, unit_tokens=None
        ):
            assert not logits.requires_grad  # scored under inference mode: no autograd graph
            for j, row in zip(idx, logits, strict=True):
                p, q = torch.softmax(row.double(), -1), torch.softmax(whole[unit[j]].double(), -1)
                assert float((p - q).abs().max()) < TOL
    assert stats.requests == len(units[1]) + len(units[2])


# ----------------------------------------------------------------------------- the vocabulary head


def _head_per_unit_vs_own_logits(path: Path, monkeypatch: pytest.MonkeyPatch, softcap: float | None) -> None:
    monkeypatch.setattr(packed_forward, "HEAD_ROWS", 4)  # several head products per unit
    backend = make_backend(path)
    model = backend.model
    if softcap is not None:  # a Gemma config field, read by the model's own forward too
        monkeypatch.setattr(model.config, "final_logit_softcapping", softcap)
    ids = [backend.encode(r.messages) for r in qq_requests(3)]
    got: dict[int, Any] = {}
    for idx, logits in next_token_logits(model, ids, stats=ForwardStats(), pack_tokens=16):
        assert len(idx) <= 4
        got.update(zip(idx, logits, strict=True))
    assert sorted(got) == list(range(len(ids)))
    for i, seq in enumerate(ids):
        with torch.inference_mode():
            own = model(input_ids=torch.tensor([seq]), logits_to_keep=1).logits[0, -1]
        assert float((got[i] - own).abs().max()) < 1e-4
        if softcap is not None:
            assert float(got[i].abs().max()) <= softcap


def test_the_head_applied_per_unit_equals_the_models_own_logits(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vocabulary head, run apart from the decoder over a unit's prompts in groups of rows
    (made small here), gives the model's own logits."""
    _head_per_unit_vs_own_logits(tiny_dir, monkeypatch, None)


def test_the_head_applied_per_unit_soft_caps_as_gemma_does(
    gemma_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a final logit soft-cap (a cap of 3 bends these random logits hard), the head applied
    per unit still gives the model's own logits."""
    _head_per_unit_vs_own_logits(gemma_dir, monkeypatch, 3.0)


# ----------------------------------------------------------------------------- results


def test_probs_other_and_top_k(tiny_dir: Path) -> None:
    backend = make_backend(tiny_dir, top_k=7)
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
    full = make_backend(tiny_dir).label_logprobs(requests)
    half = make_backend(tiny_dir, dtype="bfloat16").label_logprobs(requests)
    for a, b in zip(full, half, strict=True):
        assert all(abs(a.probs[k] - b.probs[k]) < 0.05 for k in a.probs)
        assert abs(sum(b.probs.values()) + b.other - 1.0) < 1e-9
