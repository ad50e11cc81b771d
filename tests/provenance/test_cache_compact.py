"""Compaction of a response cache folder: every entry into content-named packs sorted by key,
the same files for the same entries, only the kept keys when asked, no entry lost when the
process fails or is killed midway, refused while claims are held; legacy entries verified only
when their value stays the same."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from lmaudit.console import main as console
from lmaudit.errors import CacheBusy, InputError
from lmaudit.provenance import compact as compact_mod
from lmaudit.provenance.cache import CLAIMS, ResponseCache, cache_key
from lmaudit.provenance.compact import KEYS_FILE, compact, read_keys
from lmaudit.provenance.packs import PACKS


def _key(i: int) -> str:
    return cache_key("d", {"i": i})


def _fill(root: Path) -> dict[str, Any]:
    """A cache holding loose verified entries, packs, and legacy entries; the values served."""
    c = ResponseCache(root)
    want: dict[str, Any] = {}
    for i in range(6):  # loose, verified
        v = {"probs": {"A": i / 10, "B": 1 - i / 10}, "top_k": [["A", i / 10]], "other": 0.0}
        c.put(_key(i), v)
        want[_key(i)] = v
    for start in (10, 14):  # two packs
        items = [(_key(i), f"draw {i}") for i in range(start, start + 4)]
        c.put_many(items)
        want.update(items)
    for i in range(20, 23):  # legacy: canonical JSON without a digest
        key = _key(i)
        path = root / key[:2] / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "value": f"old {i}"}, separators=(",", ":")))
        want[key] = f"old {i}"
    return want


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _served(root: Path, keys: Any) -> dict[str, Any]:
    c = ResponseCache(root)
    return {k: c.get(k) for k in keys}


def test_every_entry_goes_into_sorted_packs_and_is_served_unchanged(tmp_path: Path) -> None:
    want = _fill(tmp_path)
    report = compact(ResponseCache(tmp_path))
    files = _files(tmp_path)
    assert files and all(name.startswith(f"{PACKS}/") for name in files), sorted(files)
    assert report.entries == len(want) and report.packed == 9 and report.verified == 3
    assert report.dropped == 0 and not report.left_loose and not report.invalid
    keys = [json.loads(line)["key"] for body in files.values() for line in body.splitlines()]
    assert keys == sorted(want)  # one pack here, in key order
    fresh = ResponseCache(tmp_path)
    assert {k: fresh.get(k) for k in want} == want
    assert fresh.stats.legacy == 0 and fresh.stats.invalid == 0  # legacy entries are now verified


def test_the_same_entries_give_the_same_files_whatever_their_history(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(compact_mod, "MAX_PACK_BYTES", 400)  # several packs
    items = [(_key(i), {"text": f"answer {i}", "n": i}) for i in range(30)]
    a, b = ResponseCache(tmp_path / "a"), ResponseCache(tmp_path / "b")
    for key, value in items:
        a.put(key, value)
    b.put_many(items[20:])
    b.put_many(items[:7])
    for key, value in reversed(items[7:20]):
        b.put(key, value)
    compact(a)
    compact(b)
    files_a, files_b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert files_a == files_b and len(files_a) > 3
    for name, body in files_a.items():  # bounded, content-named
        assert len(body) <= 400 or body.count(b"\n") == 1
        assert Path(name).stem == hashlib.sha256(body).hexdigest()


def test_a_compact_folder_compacts_to_itself(tmp_path: Path) -> None:
    _fill(tmp_path)
    compact(ResponseCache(tmp_path))
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()}
    again = compact(ResponseCache(tmp_path))
    assert again.written == 0 and again.removed == 0 and again.packed == 0
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()} == before


def test_keep_drops_every_other_key_from_files_and_packs(tmp_path: Path) -> None:
    want = _fill(tmp_path)
    old_packs = {p.name for p in (tmp_path / PACKS).iterdir()}
    keep = {_key(1), _key(11), _key(15), _key(21)}
    report = compact(ResponseCache(tmp_path), keep)
    assert report.entries == 4 and report.dropped == len(want) - 4
    served = _served(tmp_path, want)
    assert {k for k, v in served.items() if v is not None} == keep
    assert all(served[k] == want[k] for k in keep)
    assert not old_packs & {p.name for p in (tmp_path / PACKS).iterdir()}  # both packs rewritten
    assert all(n.startswith(f"{PACKS}/") for n in _files(tmp_path))
    assert compact(ResponseCache(tmp_path), set()).entries == 0
    assert not _files(tmp_path)


def test_legacy_entry_whose_value_packing_would_change_stays_as_it_is(tmp_path: Path) -> None:
    odd = {
        _key(1): '{"key":"%s","value":{"b":1,"a":2}}',  # key order: canonical JSON would sort it
        _key(2): '{"key":"%s","value":1e400}',  # a float JSON cannot write back
        _key(3): '{\n  "key": "%s",\n  "value": [1.0, -0.0, "x"]\n}',  # indented: packs fine
    }
    for key, text in odd.items():
        p = tmp_path / key[:2] / f"{key}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text % key)
    before = _served(tmp_path, odd)
    report = compact(ResponseCache(tmp_path))
    assert report.packed == 1 and report.verified == 1
    assert sorted(report.left_loose) == sorted(
        str(tmp_path / k[:2] / f"{k}.json") for k in odd if k != _key(3)
    )
    for key in (_key(1), _key(2)):  # untouched
        assert (tmp_path / key[:2] / f"{key}.json").read_text() == odd[key] % key
    after = _served(tmp_path, odd)
    assert list(after[_key(1)]) == ["b", "a"] and after == before
    assert [type(x) for x in after[_key(3)]] == [float, float, str] and str(after[_key(3)][1]) == "-0.0"


def test_damaged_entries_stay_in_place_unless_not_kept(tmp_path: Path) -> None:
    want = _fill(tmp_path)
    bad = tmp_path / _key(50)[:2] / f"{_key(50)}.json"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text("{not json")
    report = compact(ResponseCache(tmp_path))
    assert bad.read_text() == "{not json" and len(report.invalid) == 1 and str(bad) in report.invalid[0]
    compact(ResponseCache(tmp_path), set(want))
    assert not bad.exists()
    assert _served(tmp_path, want) == want


def test_refused_while_a_process_holds_claims(tmp_path: Path) -> None:
    _fill(tmp_path)
    holder = ResponseCache(tmp_path)
    before = _files(tmp_path)
    assert holder.claim(_key(99))
    with pytest.raises(CacheBusy, match=f"{_key(99)}.claim"):
        compact(ResponseCache(tmp_path))
    holder.release(_key(99))
    name, granted = holder.claim_many([_key(98)])
    assert granted
    with pytest.raises(CacheBusy, match=str(name)):
        compact(ResponseCache(tmp_path))
    assert {n: b for n, b in _files(tmp_path).items() if not n.endswith(".claim")} == before  # untouched
    assert console(["cache", "compact", str(tmp_path)]) == 2
    holder.release_many(name)
    # a claim whose owner is long gone does not hold the folder: it is removed with the rest
    stale = tmp_path / _key(97)[:2] / f"{_key(97)}.claim"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text(f"{os.getpid()} {socket.gethostname()} {time.time() - 10 * holder.claim_ttl_s}")
    compact(ResponseCache(tmp_path))
    assert not stale.exists() and all(n.startswith(f"{PACKS}/") for n in _files(tmp_path))


class Crash(Exception):
    pass


def _failing_after(n: int, then: Any) -> Any:
    calls = {"n": 0}
    real = compact_mod._remove

    def remove(path: Path) -> None:
        if calls["n"] >= n:
            then()
        calls["n"] += 1
        real(path)

    return remove


def _raise() -> None:
    raise Crash


@pytest.mark.parametrize("after", [0, 1, 5, 10])  # of 11 removals
def test_a_compaction_that_fails_midway_loses_no_entry(tmp_path: Path, monkeypatch, after: int) -> None:
    want = _fill(tmp_path / "c")
    _fill(tmp_path / "ref")
    keep = set(list(want)[2:])
    compact(ResponseCache(tmp_path / "ref"), keep)
    with monkeypatch.context() as m:
        m.setattr(compact_mod, "_remove", _failing_after(after, _raise))
        with pytest.raises(Crash):
            compact(ResponseCache(tmp_path / "c"), keep)
    assert {k: v for k, v in _served(tmp_path / "c", want).items() if k in keep} == {k: want[k] for k in keep}
    compact(ResponseCache(tmp_path / "c"), keep)  # finishes the job: the files of an uninterrupted run
    assert _files(tmp_path / "c") == _files(tmp_path / "ref")


def test_a_compaction_that_fails_while_writing_packs_changes_nothing(tmp_path: Path, monkeypatch) -> None:
    want = _fill(tmp_path)
    monkeypatch.setattr(compact_mod, "MAX_PACK_BYTES", 300)

    def write(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    before = _files(tmp_path)
    monkeypatch.setattr(compact_mod, "atomic_write_bytes", write)
    with pytest.raises(OSError):
        compact(ResponseCache(tmp_path))
    assert _files(tmp_path) == before and _served(tmp_path, want) == want


def _compact_and_die(root: str, after: int, when: str) -> None:
    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    if when == "removing":
        compact_mod._remove = _failing_after(after, die)  # this child only
    else:
        real = compact_mod.atomic_write_bytes
        count = {"n": 0}

        def write(*args: Any, **kwargs: Any) -> Any:
            if count["n"] == after:
                die()
            count["n"] += 1
            return real(*args, **kwargs)

        compact_mod.atomic_write_bytes = write
        compact_mod.MAX_PACK_BYTES = 300
    compact(ResponseCache(Path(root)))


@pytest.mark.parametrize(("when", "after"), [("writing", 2), ("removing", 3), ("removing", 10)])
def test_a_killed_compaction_loses_no_entry(tmp_path: Path, when: str, after: int) -> None:
    want = _fill(tmp_path)
    proc = mp.get_context("fork").Process(target=_compact_and_die, args=(str(tmp_path), after, when))
    proc.start()
    proc.join(60)
    assert proc.exitcode == -signal.SIGKILL
    assert _served(tmp_path, want) == want
    compact(ResponseCache(tmp_path))
    assert _served(tmp_path, want) == want and all(n.startswith(f"{PACKS}/") for n in _files(tmp_path))


def test_a_reader_keeps_being_served_while_packs_are_rewritten(tmp_path: Path) -> None:
    want = _fill(tmp_path)
    reader = ResponseCache(tmp_path)
    assert reader.get(_key(10)) == want[_key(10)]  # indexes the packs, holds one open
    compact(ResponseCache(tmp_path), set(want) - {_key(0)})  # every pack replaced
    assert {k: reader.get(k) for k in want if k != _key(0)} == {k: v for k, v in want.items() if k != _key(0)}
    assert reader.stats.invalid == 0


def test_used_keys_are_the_keys_served_or_stored(tmp_path: Path) -> None:
    _fill(tmp_path)
    c = ResponseCache(tmp_path)
    assert c.get(_key(1)) is not None and c.get(_key(11)) is not None and c.get(_key(21)) is not None
    assert c.get(_key(77)) is None  # a miss is not used
    c.put(_key(78), "x")
    c.put_many([(_key(79), "y")])
    assert c.used_keys == {_key(1), _key(11), _key(21), _key(78), _key(79)}


def test_key_lists_for_keep(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "measurements.jsonl").write_text("{}\n")
    with pytest.raises(InputError, match=f"{KEYS_FILE}: not found"):
        read_keys(run / "measurements.jsonl")
    (run / KEYS_FILE).write_text(f"{_key(1)}\n{_key(2)}\n")
    assert read_keys(run) == read_keys(run / "measurements.jsonl") == {_key(1), _key(2)}
    listed = tmp_path / "keys.txt"
    listed.write_text(f"# kept\n{_key(3)}  # the third\n\nnot-a-key\n")
    with pytest.raises(InputError, match=r"keys.txt: line 4: 'not-a-key' is not a cache key"):
        read_keys(listed)


def test_the_command_compacts_to_the_union_of_the_runs_keys(tmp_path: Path, capsys) -> None:
    want = _fill(tmp_path / "cache")
    run = tmp_path / "run"
    run.mkdir()
    (run / KEYS_FILE).write_text(f"{_key(2)}\n")
    listed = tmp_path / "keys.txt"
    listed.write_text(f"{_key(12)}\n")
    args = ["cache", "compact", str(tmp_path / "cache"), "--keep-from", str(run), "--keep-from", str(listed)]
    assert console(args) == 0
    assert "2 entries in 1 pack(s)" in capsys.readouterr().out
    served = _served(tmp_path / "cache", want)
    assert {k for k, v in served.items() if v is not None} == {_key(2), _key(12)}
    assert console(["cache", "compact", str(tmp_path / "cache"), "--keep-from", str(tmp_path / "no")]) == 2
    assert (tmp_path / "cache" / CLAIMS).is_dir()  # the lock's folder; holds no file
