"""Sampling (``hf.sampling``): draw ``i`` of a request is the same draw whatever else is in the
call, whatever ``n`` and however the requests are grouped (the determinism contract's
identical draws on one host and configuration); greedy and top-p; sample groups."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_hf import chat, make_backend, one_thread, tiny_checkpoint  # noqa: E402

from lmaudit.backends.base import SampleRequest  # noqa: E402
from lmaudit.backends.hf import sampling as hf_sampling  # noqa: E402
from lmaudit.backends.hf.backend import HFBackend  # noqa: E402
from lmaudit.backends.hf.sampling import draw_token, kv_bytes_per_token, sample_groups  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


@pytest.fixture(scope="module", params=["gemma3", "llama"])
def tiny_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp(f"tiny-{request.param}"), request.param)


def _sample_req(**kw: Any) -> SampleRequest:
    msgs = ({"role": "user", "content": "please answer the question"},)
    return SampleRequest(msgs, **{"n": 5, "temperature": 1.0, "seed": 7, **kw})


@pytest.mark.parametrize(("max_tokens", "block"), [(1, 1), (4, 1), (4, 4)])
def test_sampling_draw_i_independent_of_n_and_batch(tiny_dir: Path, max_tokens: int, block: int) -> None:
    backend = make_backend(tiny_dir, sample_block=block)
    small = backend.sample([_sample_req(max_tokens=max_tokens)])[0].texts
    other = SampleRequest(({"role": "user", "content": "the economy"},), n=3, max_tokens=max_tokens, seed=1)
    fresh = make_backend(tiny_dir, sample_block=block)  # nothing memoised: the prefill is redone
    large = fresh.sample([other, _sample_req(n=50, max_tokens=max_tokens)])[1].texts
    assert len(small) == 5 and len(large) == 50
    assert large[:5] == small
    assert len(set(large)) > 5  # a random tiny model at T=1 is far from deterministic
    reseeded = backend.sample([_sample_req(n=50, seed=8, max_tokens=max_tokens)])[0].texts
    assert reseeded != large


def test_draws_of_a_conversation_do_not_depend_on_its_company(tiny_dir: Path) -> None:
    """Multi-turn prompts prefilled in one call with prompts that share their leading messages
    draw exactly what each draws alone in a fresh backend."""
    reqs = [
        SampleRequest(chat(t, seed=s), n=20, temperature=1.0, seed=s, max_tokens=3)
        for t, s in ((2, 1), (3, 1), (2, 2), (1, 1))
    ]
    together = [r.texts for r in make_backend(tiny_dir).sample(reqs)]
    alone = [make_backend(tiny_dir).sample([r])[0].texts for r in reqs]
    assert together == alone
    assert len({tuple(t) for t in together}) == len(reqs)


def test_sampling_greedy_and_top_p(tiny_dir: Path) -> None:
    backend = make_backend(tiny_dir)
    greedy = backend.sample([_sample_req(n=6, temperature=0.0, max_tokens=3)])[0].texts
    assert len(set(greedy)) == 1
    nucleus = backend.sample([_sample_req(n=40, top_p=1e-9)])[0].texts
    assert len(set(nucleus)) == 1
    assert nucleus[0] == backend.sample([_sample_req(n=1, temperature=0.0)])[0].texts[0]


def test_draw_token_inverts_the_cdf() -> None:
    """One uniform per draw, inverted through the temperature-scaled CDF: the empirical
    frequencies of many draws follow softmax(logits / T), and greedy consumes a uniform too."""
    logits = torch.tensor([0.0, 1.0, 2.0, -1.0])
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(4)
    n = 4000
    for _ in range(n):
        counts[draw_token(logits, 0.5, 1.0, gen)] += 1
    expected = torch.softmax(logits.double() / 0.5, -1)
    assert float((counts / n - expected).abs().max()) < 0.03
    a, b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert draw_token(logits, 0.0, 1.0, a) == 2  # greedy: the argmax, after one uniform
    torch.rand((), generator=b, dtype=torch.float64)
    assert torch.equal(
        torch.rand((), generator=a, dtype=torch.float64), torch.rand((), generator=b, dtype=torch.float64)
    )


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
    backend = make_backend(tiny_dir)
    reqs = [SampleRequest(chat(2, seed=s), n=20, temperature=1.0, seed=s, max_tokens=2) for s in range(5)]
    whole = [r.texts for r in backend.sample(reqs)]
    seen: list[int] = []
    real = HFBackend._sample_group

    def spy(self: HFBackend, requests: Any, ids: Any, *rest: Any) -> Any:
        seen.append(len(requests))
        return real(self, requests, ids, *rest)

    monkeypatch.setattr(hf_sampling, "SAMPLE_GROUP_BYTES", 1)
    monkeypatch.setattr(HFBackend, "_sample_group", spy)
    fresh = make_backend(tiny_dir)
    assert [r.texts for r in fresh.sample(reqs)] == whole and seen == [1] * 5
    cfg = backend.model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    assert (
        kv_bytes_per_token(backend.model)
        == 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * 4
    )
