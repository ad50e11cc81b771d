"""Progress: a bar shows its time left only once the rate has settled, says when it waits on a
server, and the QQ study's G3 spot check has a bar of its own."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

from lmaudit.backends.base import LabelRequest, LabelResult, SampleRequest, SampleResult
from lmaudit.backends.cached import CachedBackend, sample_value
from lmaudit.backends.registry import build_backend
from lmaudit.pipeline import run
from lmaudit.progress import SettledBar
from lmaudit.provenance.cache import ResponseCache, cache_key

_ETA = re.compile(r"\[[^\]]*<[^\]]*\]")  # tqdm's "[elapsed<remaining, rate]"


def _bar(**kwargs: int) -> SettledBar:
    return SettledBar(file=io.StringIO(), mininterval=0, **kwargs)


def test_no_time_left_until_the_bar_has_done_its_settling_share() -> None:
    bar = _bar(total=100)  # 5% of 100 units: 5
    assert bar.settle == 5
    for _ in range(4):
        bar.update(1)
        assert not _ETA.search(str(bar)), str(bar)
    bar.update(1)
    assert _ETA.search(str(bar)), str(bar)
    bar.close()


def test_units_done_before_the_bar_started_do_not_settle_it() -> None:
    bar = _bar(total=1000, initial=900)  # 100 left: at least 2, 5% of 100 = 5
    assert bar.settle == 5 and not _ETA.search(str(bar))
    bar.update(4)
    assert not _ETA.search(str(bar))
    bar.update(1)
    assert _ETA.search(str(bar))
    bar.close()
    few = _bar(total=9)  # few long units: two done before any time left
    assert few.settle == 2
    few.update(1)
    assert not _ETA.search(str(few))
    few.update(1)
    assert _ETA.search(str(few))
    few.close()


def test_a_format_of_the_callers_own_is_kept() -> None:
    bar = SettledBar(total=10, file=io.StringIO(), mininterval=0, bar_format="{n_fmt} of {total_fmt}")
    bar.update(1)
    assert str(bar) == "1 of 10"
    bar.close()


def test_the_g3_spot_check_has_its_own_bar(make_cfg, capsys) -> None:
    run(make_cfg("model=sim_projective", "items=sim_demo", "progress=true", "mlflow.enabled=false"))
    err = capsys.readouterr().err
    # two items, both orders, n = 200 accepted answers at each of the two positions
    assert "G3 check: 100%" in err and "1600/1600" in err, err[-2000:]


def test_a_bar_waiting_on_a_server_says_so(openai_stub, tmp_path, capsys) -> None:
    _, url = openai_stub
    backend = build_backend({"backend": "openai", "name": "toy", "base_url": url, "model": "toy"})
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache"), batch_size=2, progress=True)
    requests = [
        SampleRequest(messages=({"role": "user", "content": f"q{i}"},), n=1, seed=i) for i in range(3)
    ]
    assert [r.texts for r in cached.sample(requests)] == [["A"]] * 3
    err = capsys.readouterr().err
    assert f"waiting on {url}" in err, err
    final = err.rstrip().split("\r")[-1]  # the bar as it is left: answered, waiting on nothing
    assert "3/3" in final and "waiting" not in final, final
    cached.sample(requests)  # every answer cached: nothing is waited on
    assert "waiting" not in capsys.readouterr().err


class _WholeServed:
    """A label backend answered as a whole (``iter_label_logprobs``) from a server: its bar
    shows no time left, and says what it waits on while the whole batch is asked."""

    reads_meta = False
    base_url = "http://whole.invalid/v1"

    def __init__(self) -> None:
        self.identity = {"backend": "test-whole-served", "version": 1}

    def label_logprobs(self, requests: list[LabelRequest], top_k: int = 10) -> list[LabelResult]:
        return [res for _, res in self.iter_label_logprobs(requests, top_k)]

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        return {label: [label] for label in request.labels}

    def iter_label_logprobs(
        self, requests: list[LabelRequest], top_k: int = 10
    ) -> Iterator[tuple[int, LabelResult]]:
        for j, _ in enumerate(requests):
            yield j, LabelResult(probs={"A": 0.75, "B": 0.25}, other=0.0, top_k=[("A", 0.75)])


def test_a_bar_over_work_answered_as_a_whole_says_what_it_waits_on(tmp_path, capsys) -> None:
    cached = CachedBackend(_WholeServed(), ResponseCache(tmp_path / "cache"), progress=True)
    requests = [
        LabelRequest(messages=({"role": "user", "content": f"q{i}"},), labels=("A", "B")) for i in range(3)
    ]
    assert [r.probs["A"] for r in cached.label_logprobs(requests, top_k=1)] == [0.75] * 3
    err = capsys.readouterr().err
    assert "waiting on http://whole.invalid/v1" in err, err
    assert not _ETA.search(err), err  # answered as a whole: never a time left


class _Streaming:
    """A sampling backend that yields each request's draws on its own, and notes how many
    earlier requests the cache layer had stored (and counted) when each was asked for."""

    reads_meta = False

    def __init__(self, cache: ResponseCache) -> None:
        self.identity = {"backend": "test-streaming", "version": 1}
        self.cache = cache
        self.stored_before: list[int] = []
        self.cached: CachedBackend | None = None

    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        return [res for _, res in self.iter_samples(requests)]

    def iter_samples(self, requests: list[SampleRequest]) -> Iterator[tuple[int, SampleResult]]:
        assert self.cached is not None
        for j, r in enumerate(requests):
            keys = [cache_key(self.cached.digest, q.payload(False, 0)) for q in requests[:j]]
            self.stored_before.append(sum(self.cache.get(k, sample_value) is not None for k in keys))
            yield j, SampleResult(texts=[f"draw {r.seed}"])


def test_a_backend_that_yields_draws_per_request_is_stored_and_counted_per_request(tmp_path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    backend = _Streaming(cache)
    cached = CachedBackend(backend, cache, batch_size=16, progress=False)
    backend.cached = cached
    requests = [SampleRequest(messages=({"role": "user", "content": "q"},), n=1, seed=i) for i in range(5)]
    assert [r.texts for r in cached.sample(requests)] == [[f"draw {i}"] for i in range(5)]
    # one batch of five: each request's draws stored before the next is asked for
    assert backend.stored_before == [0, 1, 2, 3, 4]
