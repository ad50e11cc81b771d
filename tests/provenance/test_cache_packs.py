"""Packs (many entries in one file) and group claims (many keys under one claim file) of the
response cache, as the embedding contract uses them: content-addressed pack names, other
processes' packs seen at once, damaged pack lines rejected and re-asked, and processes with
overlapping text sets embedding each text exactly once."""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import socket
import time
from pathlib import Path

import numpy as np

from lmaudit.backends.embed.cached import CachedEmbedder
from lmaudit.backends.sim.embed import SimEmbedder
from lmaudit.provenance.cache import CLAIMS, ResponseCache, cache_key
from lmaudit.provenance.packs import PACKS


def _items(n: int, tag: str = "v") -> list[tuple[str, dict[str, object]]]:
    return [(cache_key("d", {"i": i}), {"value": f"{tag}{i}", "i": i}) for i in range(n)]


def test_put_many_is_one_content_addressed_file(tmp_path: Path) -> None:
    items = _items(5)
    a, b = ResponseCache(tmp_path / "a"), ResponseCache(tmp_path / "b")
    a.put_many(items)
    b.put_many(items)
    packs_a = sorted((tmp_path / "a" / PACKS).iterdir())
    packs_b = sorted((tmp_path / "b" / PACKS).iterdir())
    assert len(packs_a) == 1 and [p.name for p in packs_a] == [p.name for p in packs_b]
    assert packs_a[0].read_bytes() == packs_b[0].read_bytes()
    assert not list((tmp_path / "a").rglob("*.json"))  # no per-key file
    assert len(packs_a[0].read_text().splitlines()) == 5
    fresh = ResponseCache(tmp_path / "a")
    for key, value in items:
        assert fresh.get(key) == value and key in fresh
    assert fresh.get(cache_key("d", {"i": 99})) is None
    assert fresh.stats.hits == 5 and fresh.stats.misses == 1 and a.stats.writes == 5
    # another batch is another pack; both are served
    a.put_many([(cache_key("d", {"i": 7}), "seven"), (cache_key("d", {"i": 8}), "eight")])
    assert len(list((tmp_path / "a" / PACKS).iterdir())) == 2
    assert ResponseCache(tmp_path / "a").get(cache_key("d", {"i": 7})) == "seven"


def test_a_reader_sees_packs_written_after_it_listed_them(tmp_path: Path) -> None:
    writer, reader = ResponseCache(tmp_path), ResponseCache(tmp_path)
    (k1, v1), (k2, v2) = _items(2)
    writer.put_many([(cache_key("d", {"x": 0}), 0)])
    assert reader.get(k1) is None  # lists the packs folder
    writer.put_many([(k1, v1)])  # within the clock's granularity of that listing
    assert reader.get(k1) == v1
    time.sleep(1.2)  # the listing is now old enough to be trusted until the folder changes
    assert reader.get(k2) is None
    writer.put_many([(k2, v2)])
    assert reader.get(k2) == v2


def test_a_damaged_pack_line_is_rejected_and_asked_again(tmp_path: Path, caplog) -> None:
    items = _items(3)
    ResponseCache(tmp_path).put_many(items)
    (pack,) = (tmp_path / PACKS).iterdir()
    lines = pack.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"v1"', b'"v1-edited"')  # keeps the JSON valid, breaks the digest
    pack.write_bytes(b"\n".join(lines))
    cache = ResponseCache(tmp_path)
    with caplog.at_level(logging.WARNING, logger="lmaudit.provenance.cache"):
        assert cache.get(items[1][0]) is None
    assert cache.stats.invalid == 1
    assert pack.name in caplog.text and items[1][0] in caplog.text and "sha256" in caplog.text
    assert cache.get(items[0][0]) == items[0][1] and cache.get(items[2][0]) == items[2][1]
    cache.put_many([items[1]])  # the answer asked again goes into a new pack
    assert cache.get(items[1][0]) == items[1][1]
    other = ResponseCache(tmp_path)  # a process that meets the damaged line first, then the new one
    assert other.get(items[1][0]) == items[1][1]


def test_a_group_claim_excludes_others_and_a_dead_owners_is_taken_over(tmp_path: Path) -> None:
    a, b = ResponseCache(tmp_path), ResponseCache(tmp_path)
    keys = [k for k, _ in _items(6)]
    name, granted = a.claim_many(keys[:4])
    assert granted == set(keys[:4]) and name is not None
    assert all(b.claimed(k) for k in keys[:4]) and not b.claimed(keys[4])
    assert not b.claim(keys[0])  # the per-key claim respects group claims ...
    assert b.claim(keys[5]) and a.claim_many([keys[5]]) == (None, set())  # ... and the reverse
    name_b, granted_b = b.claim_many(keys)
    assert granted_b == {keys[4]}
    a.release_many(name)
    assert not b.claimed(keys[0])
    b.release_many(name_b)
    b.release(keys[5])
    assert not list((tmp_path / CLAIMS).iterdir())
    # a claim whose owner no longer exists on this host is removed and its keys granted
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    dead = {"pid": pid, "host": socket.gethostname(), "time": time.time(), "keys": keys[:2]}
    (tmp_path / CLAIMS / f"{pid}-1.claim").write_text(json.dumps(dead))
    assert not a.claimed(keys[0])
    assert a.claim_many(keys[:2])[1] == set(keys[:2])


class LoggingSim(SimEmbedder):
    """The sim embedder, slowed down, appending every text it is asked to a shared log."""

    def __init__(self, log: Path) -> None:
        super().__init__(dim=32)
        self.log = log

    def embed(self, texts: list[str]) -> np.ndarray:
        time.sleep(0.002 * len(texts))
        with self.log.open("a") as fh:
            fh.write("".join(t + "\n" for t in texts))
        return super().embed(texts)


def _embed_worker(root: str, log: str, lo: int, hi: int, out: str) -> None:
    texts = [f"text number {i}" for i in range(lo, hi)]
    vecs = CachedEmbedder(
        LoggingSim(Path(log)), ResponseCache(Path(root)), batch_size=16, progress=False, poll_s=0.01
    ).embed(texts)
    np.save(out, vecs)


def test_processes_with_overlapping_texts_embed_each_once(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    log, root = tmp_path / "asked.log", tmp_path / "cache"
    spans = [(0, 300), (150, 450), (100, 400)]
    procs = [
        ctx.Process(target=_embed_worker, args=(str(root), str(log), lo, hi, str(tmp_path / f"out{j}.npy")))
        for j, (lo, hi) in enumerate(spans)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    asked = log.read_text().splitlines()
    assert len(asked) == len(set(asked)) == 450  # every text embedded by exactly one process
    ref = SimEmbedder(dim=32)
    for j, (lo, hi) in enumerate(spans):
        got = np.load(tmp_path / f"out{j}.npy")
        assert np.array_equal(got, ref.embed([f"text number {i}" for i in range(lo, hi)]))
    assert not list(root.rglob("*.json")) and not list(root.rglob("*.claim"))
    lines = sum(len(p.read_text().splitlines()) for p in (root / PACKS).iterdir())
    assert lines == 450 and len(list((root / PACKS).iterdir())) <= 450 // 16 + 3 * 2
