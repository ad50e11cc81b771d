"""The model's load is a step of its own: the cache loads the backend's model before the first
miss is answered, says so and times it, so no progress bar counts the load as its first item
(a bar whose first item holds a model load shows an ETA of the load times the item count); a
bar over prompts answered as one prefix trie shows no time left, which its first prompts (they
carry every shared prefix) would overstate by far."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tiny_hf import make_backend, one_thread, qq_requests, tiny_checkpoint

from lmaudit.backends.cached import CachedBackend
from lmaudit.provenance.cache import ResponseCache

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


def test_the_model_is_loaded_before_the_first_answer_and_only_when_needed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = make_backend(tiny_checkpoint(tmp_path / "tiny", "gemma3"))
    seen: list[bool] = []
    answer = backend.iter_label_logprobs  # what the cache calls for this backend

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(backend._model is not None)  # loaded before the bar's first item?
        return answer(*args, **kwargs)

    backend.iter_label_logprobs = watched  # type: ignore[method-assign]
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache"), progress=True, batch_size=2)
    reqs = qq_requests(2)
    cached.label_logprobs(reqs, top_k=5)
    assert seen and all(seen)
    err = capsys.readouterr().err
    assert err.index("loading ") < err.index("loaded in ") < err.index("measuring")
    assert cached.seconds["load_model"] > 0
    # answered as a whole trie, the first prompts carry the shared prefixes: no time left shown
    bars = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("measuring")]
    assert bars and not any("<" in line for line in bars), bars

    # everything cached: a fresh backend is never loaded
    again = make_backend(tiny_checkpoint(tmp_path / "tiny", "gemma3"))
    CachedBackend(again, ResponseCache(tmp_path / "cache"), progress=False).label_logprobs(reqs, top_k=5)
    assert again._model is None
