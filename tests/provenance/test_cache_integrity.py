"""Damaged, edited and legacy cache entries, as real files.

Every damaged entry is reported once (a warning naming its path), counted as ``invalid``,
asked again and rewritten; an edited entry is caught by its digest; entries without a digest
(as the repository's tracked caches are) are still served; keys are those of before.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lmaudit.backends.base import LabelRequest, LabelResult, SampleRequest, SampleResult
from lmaudit.backends.cached import CachedBackend
from lmaudit.provenance.cache import ResponseCache, cache_key, entry_digest
from lmaudit.provenance.digest import canonical_json

REPO = Path(__file__).resolve().parents[2]
MSG = ({"role": "user", "content": "Is it A?"},)
LREQ = LabelRequest(messages=MSG, labels=("A", "B"))
SREQ = SampleRequest(messages=MSG, n=2, seed=7)


class Asked:
    """A real backend that answers fixed values and records what it was asked."""

    reads_meta = False

    def __init__(self) -> None:
        self.identity = {"backend": "asked", "version": 1}
        self.labels = 0
        self.draws = 0

    def label_logprobs(self, requests: list[LabelRequest], top_k: int = 10) -> list[LabelResult]:
        self.labels += len(requests)
        return [LabelResult(probs={"A": 0.6, "B": 0.3}, other=0.1, top_k=[("A", 0.6)]) for _ in requests]

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        return {label: [label] for label in request.labels}

    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        self.draws += sum(r.n for r in requests)
        return [SampleResult(texts=[f"draw{d}" for d in range(r.n)]) for r in requests]


def fresh(root: Path) -> tuple[CachedBackend, Asked, ResponseCache, Path]:
    """A cache holding the label answer to LREQ; returns the path of that entry."""
    backend = Asked()
    cache = ResponseCache(root)
    cached = CachedBackend(backend, cache, progress=False)
    cached.label_logprobs([LREQ], top_k=3)
    (path,) = root.glob("*/*.json")
    return cached, backend, cache, path


def _edit_value(p: Path) -> None:
    entry = json.loads(p.read_text())
    entry["value"]["probs"]["A"] = 0.9  # valid JSON, right shape, wrong answer
    p.write_text(json.dumps(entry))


def _to_directory(p: Path) -> None:
    p.unlink()
    p.mkdir()
    (p / "x").write_text("?")


DAMAGE: dict[str, Callable[[Path], None]] = {
    "not UTF-8": lambda p: p.write_bytes(b'{"key": "\xff\xfe"}'),
    "JSON list": lambda p: p.write_text("[1, 2, 3]"),
    "directory": _to_directory,
    "truncated": lambda p: p.write_text(p.read_text()[:40]),
    "edited value": _edit_value,
    "NaN inside": lambda p: p.write_text(p.read_text().replace("0.6", "NaN", 1)),
    "wrong key": lambda p: p.write_text(p.read_text().replace('"key":"', '"key":"0', 1)),
    "empty": lambda p: p.write_bytes(b""),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_entry_reported_counted_asked_again_rewritten(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, _, _, path = fresh(tmp_path)
    DAMAGE[kind](path)
    backend = Asked()
    cache = ResponseCache(tmp_path)
    cached = CachedBackend(backend, cache, progress=False)
    with caplog.at_level(logging.WARNING, logger="lmaudit.provenance.cache"):
        (res,) = cached.label_logprobs([LREQ], top_k=3)
    warnings = [r.getMessage() for r in caplog.records if r.name == "lmaudit.provenance.cache"]
    assert len(warnings) == 1 and str(path) in warnings[0], warnings
    assert cache.stats.invalid == 1 and cache.stats.hits == 0 and cache.stats.writes == 1
    assert backend.labels == 1  # asked again
    assert res.probs == {"A": 0.6, "B": 0.3}
    # rewritten whole, with its digest: the next reader is served without a word
    assert path.is_file() and "sha256" in json.loads(path.read_text())
    again = ResponseCache(tmp_path)
    caplog.clear()
    assert CachedBackend(Asked(), again, progress=False).label_logprobs([LREQ], top_k=3) == [res]
    assert again.stats.as_dict() == {"hits": 1, "misses": 0, "writes": 0, "invalid": 0, "legacy": 0}
    assert not caplog.records


def test_sample_entry_of_wrong_shape_is_asked_again(tmp_path: Path) -> None:
    """A draw whose entry is intact (its digest matches) but is not a string, in a per-key file
    (as caches before packs hold draws) or in a pack line, is rejected and asked again."""
    cache = ResponseCache(tmp_path)
    CachedBackend(Asked(), cache, progress=False).sample([SREQ])
    (pack,) = sorted(tmp_path.glob("packs/*.jsonl"))
    lines = [json.loads(line) for line in pack.read_text().splitlines()]
    assert len(lines) == 2
    for where in ("file", "pack"):
        first = {"key": lines[0]["key"], "value": ["not", "a", "string"]}
        first["sha256"] = entry_digest(first)
        if where == "file":
            pack.unlink()
            ResponseCache(tmp_path).put(first["key"], "placeholder")
            (path,) = tmp_path.glob(f"*/{first['key']}.json")
            path.write_text(canonical_json(first))
        else:
            for old in [*tmp_path.glob("*/*.json"), *tmp_path.glob("packs/*.jsonl")]:
                old.unlink()
            pack.write_text("\n".join(canonical_json(e) for e in [first, lines[1]]) + "\n")
        backend = Asked()
        again = ResponseCache(tmp_path)
        out = CachedBackend(backend, again, progress=False).sample([SREQ])
        assert out[0].texts == ["draw0", "draw1"] and backend.draws == 2 and again.stats.invalid == 1, where


def test_legacy_entries_served_unchanged_and_counted(tmp_path: Path) -> None:
    _, _, _, path = fresh(tmp_path)
    entry = json.loads(path.read_text())
    legacy = canonical_json({"key": entry["key"], "value": entry["value"]})  # as written before digests
    path.write_text(legacy)
    backend = Asked()
    cache = ResponseCache(tmp_path)
    (res,) = CachedBackend(backend, cache, progress=False).label_logprobs([LREQ], top_k=3)
    assert backend.labels == 0 and res.probs == {"A": 0.6, "B": 0.3}
    assert cache.stats.legacy == 1 and cache.stats.invalid == 0
    assert path.read_text() == legacy  # never rewritten


def test_cache_keys_unchanged() -> None:
    payload: dict[str, Any] = {
        "messages": [{"role": "user", "content": "x"}],
        "labels": ["A", "B"],
        "top_k": 3,
    }
    # pinned before entries carried digests: dvc.lock pins measurements made under these keys
    assert cache_key("d" * 64, payload) == "e6537b7699eb8da4011a65d785cec88b3be78b0b6859927dc5810b130dfe6438"


class Slow(Asked):
    """Asked, taking at least 50 ms per call (a lower bound time.sleep guarantees)."""

    def label_logprobs(self, requests: list[LabelRequest], top_k: int = 10) -> list[LabelResult]:
        time.sleep(0.05)
        return super().label_logprobs(requests, top_k)

    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        time.sleep(0.05)
        return super().sample(requests)


def test_seconds_count_the_time_spent_answering_misses_per_contract(tmp_path: Path) -> None:
    cold = CachedBackend(Slow(), ResponseCache(tmp_path), progress=False)
    cold.label_logprobs([LREQ], top_k=3)
    assert cold.seconds["label_logprobs"] >= 0.05 and cold.seconds["sample"] == 0.0
    cold.sample([SREQ])
    assert cold.seconds["sample"] >= 0.05
    backend = Slow()
    warm = CachedBackend(backend, ResponseCache(tmp_path), progress=False)
    warm.label_logprobs([LREQ], top_k=3)
    warm.sample([SREQ])
    assert backend.labels == backend.draws == 0  # all answered from the cache...
    assert warm.seconds == {"label_logprobs": 0.0, "sample": 0.0}  # ...so no time is counted


def test_each_missing_key_is_one_miss_however_often_it_is_looked_up(tmp_path: Path) -> None:
    """A cold call looks each key up twice (before and after claiming it) and a waiting process
    polls it: the audit record's misses count keys, not lookups."""
    backend = Asked()
    cache = ResponseCache(tmp_path)
    reqs = [
        LabelRequest(messages=({"role": "user", "content": f"Is {i} A?"},), labels=("A", "B"))
        for i in range(3)
    ]
    CachedBackend(backend, cache, progress=False).label_logprobs(reqs, top_k=3)
    assert backend.labels == 3
    assert cache.stats.as_dict() == {"hits": 0, "misses": 3, "writes": 3, "invalid": 0, "legacy": 0}
    absent = cache_key("d" * 64, {"kind": "never stored"})
    assert [cache.get(absent) for _ in range(5)] == [None] * 5
    assert cache.stats.misses == 4
