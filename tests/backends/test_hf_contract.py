"""The determinism contract of fresh label probabilities (docs/architecture.md): the same
requests scored in other batch compositions, orders, packings (``pack_tokens``), scoring units
(``unit_tokens``, one unit as a Lightning rank scores it) and torch thread counts agree within
1e-5 (absolute, on probabilities: each label's, the remaining mass and the top-k)."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_hf import make_backend, max_prob_diff, one_thread, qq_requests, tiny_checkpoint  # noqa: E402

from lmaudit.backends.base import LabelRequest  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)
TOL = 1e-5


@pytest.fixture(scope="module", params=["gemma3", "llama", "gemma3-window"])
def tiny_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gemma 3, Llama, and Gemma 3 with a sliding window of 8 tokens (shorter than every prompt)."""
    family, _, window = request.param.partition("-")
    extra = {"sliding_window": 8} if window else {}
    return tiny_checkpoint(tmp_path_factory.mktemp(f"tiny-{request.param}"), family, **extra)


def _requests() -> list[LabelRequest]:
    reqs = qq_requests(4) + qq_requests(2, system=False)
    reqs.append(LabelRequest(({"role": "user", "content": "A"},), ("A", "B")))
    reqs.append(reqs[5])  # a duplicate
    return reqs


@pytest.fixture(scope="module")
def scored(tiny_dir: Path) -> tuple[Any, list[LabelRequest], list[Any]]:
    """The backend (defaults), the requests, and their scores in one call."""
    backend = make_backend(tiny_dir)
    reqs = _requests()
    return backend, reqs, backend.label_logprobs(reqs, top_k=5)


def _compositions(n: int) -> Iterator[tuple[str, list[list[int]]]]:
    """Calls covering every request once: other groupings and orders of the same requests."""
    rng = random.Random(11)
    yield "alone", [[i] for i in range(n)]
    yield "reversed", [list(reversed(range(n)))]
    shuffled = list(range(n))
    rng.shuffle(shuffled)
    yield "shuffled halves", [shuffled[: n // 2], shuffled[n // 2 :]]
    yield "odd and even", [list(range(0, n, 2)), list(range(1, n, 2))]


def _score_in(backend: Any, reqs: list[LabelRequest], calls: list[list[int]], **kw: Any) -> list[Any]:
    out: list[Any] = [None] * len(reqs)
    for call in calls:
        for i, res in zip(call, backend.label_logprobs([reqs[i] for i in call], top_k=5, **kw), strict=True):
            out[i] = res
    assert all(r is not None for r in out)
    return out


def test_batch_compositions_agree(scored: tuple[Any, list[LabelRequest], list[Any]]) -> None:
    backend, reqs, ref = scored
    for name, calls in _compositions(len(reqs)):
        assert max_prob_diff(_score_in(backend, reqs, calls), ref) < TOL, name
    # in company of other prompts (sharing their system turn): the requests' results are unmoved
    extra = qq_requests(6)[16:]
    mixed = backend.label_logprobs(extra + reqs, top_k=5)
    assert max_prob_diff(mixed[len(extra) :], ref) < TOL


@pytest.mark.parametrize(
    ("pack_tokens", "unit_tokens"), [(1, 10**6), (5, 1), (7, 30), (64, 30), (4096, 1), (4096, 10**6)]
)
def test_packings_and_units_agree(
    tiny_dir: Path, scored: tuple[Any, list[LabelRequest], list[Any]], pack_tokens: int, unit_tokens: int
) -> None:
    _, reqs, ref = scored
    backend = make_backend(tiny_dir, pack_tokens=pack_tokens, unit_tokens=unit_tokens)
    assert max_prob_diff(backend.label_logprobs(reqs, top_k=5), ref) < TOL


def test_one_unit_agrees(scored: tuple[Any, list[LabelRequest], list[Any]]) -> None:
    """All requests as one unit (as a Lightning rank scores the unit it is dealt), and a unit
    of the call's units scored on its own."""
    backend, reqs, ref = scored
    assert max_prob_diff(backend.label_logprobs(reqs, top_k=5, one_unit=True), ref) < TOL
    few = [0, 3, 4, 9]
    got = backend.label_logprobs([reqs[i] for i in few], top_k=5, one_unit=True)
    assert max_prob_diff(got, [ref[i] for i in few]) < TOL


def test_thread_counts_agree(tiny_dir: Path, scored: tuple[Any, list[LabelRequest], list[Any]]) -> None:
    """Scored on 2 torch threads (the module runs on 1): within 1e-5; the thread count is back after."""
    _, reqs, ref = scored
    before = torch.get_num_threads()
    assert before == 1
    try:
        torch.set_num_threads(2)
        assert torch.get_num_threads() == 2
        two = make_backend(tiny_dir).label_logprobs(reqs, top_k=5)
    finally:
        torch.set_num_threads(before)
    assert max_prob_diff(two, ref) < TOL


def test_the_comparison_can_fail(scored: tuple[Any, list[LabelRequest], list[Any]]) -> None:
    """The measure of agreement sees a difference of the contract's size: the results of other
    requests (their labels' probabilities) are far from these."""
    ref = scored[2]
    shifted = ref[1:] + ref[:1]
    assert max_prob_diff(shifted, ref) > 1e-3
