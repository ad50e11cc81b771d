"""Progress within a long draw: the hf backend tells the tokens it decodes step by step, and the
cache layer's decoding bar moves within one batch and ends at its budget, n x max_tokens."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_hf import make_backend, one_thread, tiny_checkpoint

from lmaudit.backends import cached as cached_module
from lmaudit.backends.base import SampleRequest
from lmaudit.backends.cached import CachedBackend
from lmaudit.progress import SettledBar
from lmaudit.provenance.cache import ResponseCache

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny-gemma3"), "gemma3")


def _req(seed: int, n: int, max_tokens: int) -> SampleRequest:
    msgs = ({"role": "user", "content": f"please answer the question {seed}"},)
    return SampleRequest(msgs, n=n, temperature=1.0, seed=seed, max_tokens=max_tokens)


@pytest.mark.parametrize("block", [1, 2])
def test_tokens_are_told_step_by_step_and_add_up_to_the_budget(tiny_dir: Path, block: int) -> None:
    reqs = [_req(1, 3, 6), _req(2, 2, 5)]  # block 2: the first request's last block has a surplus row
    backend = make_backend(tiny_dir, sample_block=block)
    told: list[int] = []
    texts = [res.texts for _, res in backend.iter_samples(reqs, on_tokens=told.append)]
    # draws that may stop early: the budget they did not need is told too, so the total is exact
    assert all(t >= 0 for t in told) and sum(told) == 3 * 6 + 2 * 5
    # following the decoding changes no draw
    assert texts == [r.texts for r in make_backend(tiny_dir, sample_block=block).sample(reqs)]


@pytest.mark.parametrize("block", [1, 2])
def test_draws_that_never_stop_are_told_one_step_at_a_time(tiny_dir: Path, block: int) -> None:
    backend = make_backend(tiny_dir, sample_block=block)
    backend.stop_token_ids = frozenset()  # every draw runs to max_tokens
    told: list[int] = []
    told_before_first: int | None = None
    for _, _res in backend.iter_samples([_req(1, 3, 6)], on_tokens=told.append):
        told_before_first = len(told) if told_before_first is None else told_before_first
    # each block of draws: one call per step with its kept rows, then no budget left over
    blocks = [[1]] * 3 if block == 1 else [[2], [1]]
    assert told == [x for rows in blocks for x in rows * 6 + [0]]
    assert told_before_first == len(told)  # all of it within the one request's draws


class _Recorded(SettledBar):
    """A SettledBar that notes every update it is given, by its description."""

    updates: ClassVar[dict[str, list[float]]] = {}
    order: ClassVar[list[str]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.label = str(kwargs.get("desc"))  # a disabled tqdm bar keeps no desc of its own
        super().__init__(*args, **kwargs)

    def update(self, n: float | None = 1) -> bool | None:
        _Recorded.updates.setdefault(self.label, []).append(float(n or 0))
        _Recorded.order.append(self.label)
        return super().update(n)


def test_the_decoding_bar_moves_within_one_batch(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cached_module, "SettledBar", _Recorded)
    _Recorded.updates, _Recorded.order = {}, []
    made: list[Any] = []
    original = CachedBackend._decoding_bar

    def keep(self: CachedBackend, *args: Any) -> Any:
        bar = original(self, *args)
        made.append(bar)
        return bar

    monkeypatch.setattr(CachedBackend, "_decoding_bar", keep)
    backend = make_backend(tiny_dir)
    backend.stop_token_ids = frozenset()  # every draw runs to max_tokens
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache"), batch_size=16, progress=True)
    reqs = [_req(s, 1, 8) for s in range(3)]  # one batch: three one-draw requests of 8 tokens
    cached.sample(reqs, desc="lists")
    assert len(made) == 1 and made[0].total == 3 * 8 and made[0].unit == "token"
    # one token a step for each request, before its draw is counted on the draws' bar
    assert _Recorded.updates["lists: decoding"] == ([1.0] * 8 + [0.0]) * 3
    assert made[0].n == 3 * 8
    assert _Recorded.updates["lists"] == [1.0] * 3  # the draws' bar still counts draws
    assert _Recorded.order == (["lists: decoding"] * 9 + ["lists"]) * 3

    _Recorded.updates = {}
    cached.sample([_req(s, 4, 1) for s in range(10, 12)], desc="single")  # one-token draws
    assert made[-1].disable  # nothing decodes beyond one step: no second bar shown
    assert sum(_Recorded.updates["single"]) == 8
