"""Parallel processes share one response cache: no corruption, and no request asked twice."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

from lmaudit.backends.base import LabelRequest, LabelResult, SampleRequest, SampleResult
from lmaudit.backends.cached import CachedBackend
from lmaudit.provenance.cache import ResponseCache


class CountingBackend:
    """A real (if trivial) backend that logs every request it is asked, with a delay so that
    concurrent processes overlap."""

    reads_meta = False

    def __init__(self, log: Path, delay: float = 0.01):
        self.log = log
        self.delay = delay

    @property
    def identity(self) -> dict[str, Any]:
        return {"backend": "counting", "version": 1}

    def label_logprobs(self, requests: list[LabelRequest], top_k: int = 10) -> list[LabelResult]:
        time.sleep(self.delay * len(requests))
        with self.log.open("a") as fh:
            for r in requests:
                fh.write(r.messages[0]["content"] + "\n")
        out = []
        for r in requests:
            p = (sum(map(ord, r.messages[0]["content"])) % 97) / 100
            out.append(LabelResult(probs={"A": p, "B": 0.99 - p}, other=0.01, top_k=[("A", p)]))
        return out

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        return {lab: [lab] for lab in request.labels}

    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        time.sleep(self.delay * len(requests))
        with self.log.open("a") as fh:
            for r in requests:
                fh.write("sample:" + r.messages[0]["content"] + "\n")
        return [SampleResult(texts=[f"{r.messages[0]['content']}#{i}" for i in range(r.n)]) for r in requests]


def _requests(order: int) -> list[LabelRequest]:
    reqs = [
        LabelRequest(messages=({"role": "user", "content": f"q{i}"},), labels=("A", "B")) for i in range(120)
    ]
    return reqs if order == 0 else list(reversed(reqs))


def _worker(cache_dir: str, log: str, order: int, out: str) -> None:
    cached = CachedBackend(
        CountingBackend(Path(log)), ResponseCache(Path(cache_dir)), batch_size=4, progress=False
    )
    res = cached.label_logprobs(_requests(order), top_k=5)
    samples = cached.sample(
        [SampleRequest(messages=({"role": "user", "content": f"s{i}"},), n=5, seed=1) for i in range(20)]
    )
    Path(out).write_text(json.dumps({"probs": [r.probs for r in res], "samples": [s.texts for s in samples]}))


def test_parallel_processes_share_the_cache_without_duplicate_work(tmp_path):
    ctx = mp.get_context("fork")
    log = tmp_path / "asked.log"
    procs = [
        ctx.Process(
            target=_worker, args=(str(tmp_path / "cache"), str(log), i % 2, str(tmp_path / f"out{i}"))
        )
        for i in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    asked = log.read_text().splitlines()
    # every request and every sampling request was asked exactly once across the 4 processes
    assert sorted(asked) == sorted({*asked}) and len(asked) == 120 + 20
    outs = [json.loads((tmp_path / f"out{i}").read_text()) for i in range(4)]
    for i, o in enumerate(outs):  # every process got the same answers (workers 1, 3 asked in reverse)
        assert (o["probs"] if i % 2 == 0 else list(reversed(o["probs"]))) == outs[0]["probs"]
        assert o["samples"] == outs[0]["samples"]
    entries = list((tmp_path / "cache").rglob("*.json"))
    assert len(entries) == 120  # one file per label answer
    for e in entries:
        json.loads(e.read_text())
    packs = list((tmp_path / "cache").rglob("*.jsonl"))  # one pack per sampling request's draws
    assert len(packs) == 20
    assert sorted(len(p.read_text().splitlines()) for p in packs) == [5] * 20
    assert not list((tmp_path / "cache").rglob("*.claim"))


def test_a_dead_owners_claim_is_taken_over(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    key = "ab" + "0" * 62
    assert cache.claim(key)
    # forge a claim by a process that no longer exists on this host
    claim = tmp_path / "c" / "ab" / f"{key}.claim"
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    host = claim.read_text().split()[1]
    claim.write_text(f"{pid} {host} {time.time()}")
    assert not cache.claimed(key)
    assert cache.claim(key)
    other = ResponseCache(tmp_path / "c")
    assert not other.claim(key)  # a live claim (ours) is respected
