"""Block-sparse attention of packed chunks (``hf.packed.attention``) and its installation in a
transformers model through ``AttentionInterface`` / ``set_attn_implementation``: packed masks
attended by blocks, every other mask by the base function, as before installing."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tiny_hf import (  # noqa: E402
    make_backend,
    one_thread,
    qq_requests,
    reference_model,
    tiny_checkpoint,
    worst_vs_naive,
)

from lmaudit.backends.hf.packed.attention import (  # noqa: E402
    NAME,
    install_packed_attention,
    plan_blocks,
    supports_packed_attention,
)
from lmaudit.backends.hf.packed.forward import ForwardStats, next_token_logits  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gemma 3 with a sliding window of 8 tokens, shorter than every prompt."""
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny-gemma-window"), "gemma3", sliding_window=8)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny-llama"), "llama")


def _attn(model: Any) -> str:
    """The attention implementation a model's config names (as transformers' docs read it)."""
    return str(model.config._attn_implementation)


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


def test_block_attention_equals_dense(gemma_dir: Path) -> None:
    backend = make_backend(gemma_dir)
    model = backend.model
    assert supports_packed_attention(model)
    ids = [backend.encode(r.messages) for r in qq_requests(4) + qq_requests(2, system=False)]
    got: dict[str, dict[int, Any]] = {"blocks": {}, "dense": {}}
    for how in got:
        for idx, logits in next_token_logits(
            model, ids, stats=ForwardStats(), pack_tokens=24, block_attention=how == "blocks"
        ):
            got[how].update(zip(idx, logits, strict=True))
    assert sorted(got["blocks"]) == sorted(got["dense"]) == list(range(len(ids)))
    for i in got["dense"]:
        p_blocks = torch.softmax(got["blocks"][i].double(), -1)
        p_dense = torch.softmax(got["dense"][i].double(), -1)
        assert float((p_blocks - p_dense).abs().max()) < 1e-6


def _ordinary_forwards(model: Any, backend: Any) -> list[Any]:
    """Logits of the model's ordinary forwards: one prompt longer than the window, a padded
    batch of two (a 2-D attention mask), and a continuation over a cache (positions past it)."""
    seqs = [backend.encode(r.messages) for r in qq_requests(1)[:2]]
    long, short = max(seqs, key=len), min(seqs, key=len)
    pad = len(long) - len(short)
    batch = torch.tensor([long, [0] * pad + short])
    mask = torch.ones_like(batch)
    mask[1, :pad] = 0
    with torch.inference_mode():
        alone = model(input_ids=torch.tensor([long])).logits
        padded = model(input_ids=batch, attention_mask=mask).logits[:, -1]
        head = model(input_ids=torch.tensor([long[:12]]), use_cache=True)
        rest = model(
            input_ids=torch.tensor([long[12:]]),
            position_ids=torch.arange(12, len(long)).unsqueeze(0),
            cache=head.cache,
        ).logits
    return [alone, padded, rest]


@pytest.mark.parametrize("base", [None, "sdpa"])
def test_installing_selects_the_packed_function_and_keeps_ordinary_forwards(
    gemma_dir: Path, base: str | None
) -> None:
    """install_packed_attention registers ``lmaudit_packed+<base>`` with transformers'
    AttentionInterface and selects it; the model's ordinary forwards (no packed mask: a prompt
    longer than the sliding window, a padded batch, a continuation over a cache) give the
    logits they gave before, within 1e-6; and the model now takes packed masks."""
    model = reference_model(gemma_dir)
    backend = make_backend(gemma_dir)
    assert _attn(model) == "sdpa"
    before = _ordinary_forwards(model, backend)
    assert install_packed_attention(model, base) is True
    name = f"{NAME}+sdpa"
    assert name in transformers.AttentionInterface() and _attn(model) == name
    assert install_packed_attention(model, "sdpa") is True  # decided once per model
    after = _ordinary_forwards(model, backend)
    for a, b in zip(before, after, strict=True):
        assert float((a - b).abs().max()) < 1e-6
    ids = [backend.encode(r.messages) for r in qq_requests(2)]
    for idx, logits in next_token_logits(model, ids, stats=ForwardStats(), pack_tokens=16):
        for i, row in zip(idx, logits, strict=True):
            with torch.inference_mode():
                own = model(input_ids=torch.tensor([ids[i]])).logits[0, -1]
            assert (
                float((torch.softmax(row.double(), -1) - torch.softmax(own.double(), -1)).abs().max()) < 1e-5
            )


def test_the_base_function_serves_every_other_mask(gemma_dir: Path) -> None:
    """A base registered by the caller: the ordinary forwards of the installed model go through
    it, packed scoring does not (its masks are attended by blocks)."""
    calls: list[int] = []
    sdpa = transformers.AttentionInterface()["sdpa"]

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return sdpa(*args, **kwargs)

    transformers.AttentionInterface.register("lmaudit_test_counting", counting)
    transformers.AttentionMaskInterface.register(
        "lmaudit_test_counting", transformers.AttentionMaskInterface()["sdpa"]
    )
    model = reference_model(gemma_dir)
    backend = make_backend(gemma_dir)
    before = _ordinary_forwards(model, backend)
    assert install_packed_attention(model, "lmaudit_test_counting") is True
    assert _attn(model) == f"{NAME}+lmaudit_test_counting"
    after = _ordinary_forwards(model, backend)
    assert calls and len(calls) % model.config.num_hidden_layers == 0
    for a, b in zip(before, after, strict=True):
        assert float((a - b).abs().max()) < 1e-6
    calls.clear()
    ids = [backend.encode(r.messages) for r in qq_requests(2)]
    assert len(list(next_token_logits(model, ids, stats=ForwardStats(), pack_tokens=16))) > 0
    assert calls == []


def test_a_base_not_registered_leaves_the_model_as_it_is(gemma_dir: Path) -> None:
    """``eager`` is not in transformers' AttentionInterface: the model keeps its eager attention
    and packed scoring runs on dense masks, still the naive distributions."""
    assert "eager" not in transformers.AttentionInterface()
    backend = make_backend(gemma_dir, attn_implementation="eager", pack_tokens=16)
    model = backend.model  # loading installs what it can
    assert _attn(model) == "eager"
    assert install_packed_attention(model, "eager") is False and _attn(model) == "eager"
    assert f"{NAME}+eager" not in transformers.AttentionInterface()
    requests = qq_requests(3)
    results = backend.label_logprobs(requests, top_k=5)
    assert worst_vs_naive(backend, reference_model(gemma_dir), requests, results) < 1e-5


def test_a_model_without_layer_types_is_left_as_it_is(llama_dir: Path) -> None:
    """Llama takes one dense mask, not one per layer type: nothing is installed, and packed
    scoring runs on dense masks, still the naive distributions."""
    backend = make_backend(llama_dir, pack_tokens=16)
    model = backend.model
    assert not supports_packed_attention(model) and _attn(model) == "sdpa"
    assert install_packed_attention(model) is False and _attn(model) == "sdpa"
    requests = qq_requests(3)
    results = backend.label_logprobs(requests, top_k=5)
    assert worst_vs_naive(backend, reference_model(llama_dir), requests, results) < 1e-5
