"""The measure stage compacts a cache it owns (``paths.cache_compact=true``) to exactly the keys
the run read or wrote, through the real pipeline on the ``sim`` backends: a second run from the
compacted cache asks nothing and writes the same measurements byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lmaudit.pipeline import run
from lmaudit.provenance.compact import KEYS_FILE
from lmaudit.provenance.packs import PACKS


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _pack_keys(root: Path) -> set[str]:
    return {json.loads(line)["key"] for p in (root / PACKS).iterdir() for line in p.read_text().splitlines()}


def _measure_section(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "audit_record.json").read_text())["measure"])


def _twice(make_cfg: Any, tmp_path: Path, *overrides: str) -> tuple[Path, Path]:
    """Measure into the shared tmp cache with compaction, then again into a second run folder."""
    for name in ("first", "second"):
        run(
            make_cfg(
                *overrides, "stage=measure", "paths.cache_compact=true", "mlflow.enabled=false", name=name
            )
        )
    return tmp_path / "first", tmp_path / "second"


def _check_second_run_served_from_cache(
    first: Path, second: Path, cache: Path, packed: dict[str, bytes]
) -> None:
    assert (second / "measurements.jsonl").read_bytes() == (first / "measurements.jsonl").read_bytes()
    stats = _measure_section(second)["cache"]
    assert stats["misses"] == 0 and stats["writes"] == 0 and stats["hits"] > 0  # no backend call
    assert stats["compacted"]["written"] == 0 and stats["compacted"]["removed"] == 0
    assert _files(cache) == packed  # the compacted cache is left exactly as it was
    assert (second / KEYS_FILE).read_bytes() == (first / KEYS_FILE).read_bytes()


def test_qq_cache_holds_exactly_the_runs_keys_and_serves_a_second_run(make_cfg, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # another model's answers in the same folder: not this run's, so compacted away
    run(make_cfg("model=sim_projective", "stage=measure", "mlflow.enabled=false", name="other"))
    other = set((tmp_path / "other" / KEYS_FILE).read_text().split())
    assert any(p.suffix == ".json" for p in cache.rglob("??/*"))  # without compaction: entry files stay
    first, second = _twice(make_cfg, tmp_path, "model=sim_mixture")
    used = set((first / KEYS_FILE).read_text().split())
    assert used and not used & other
    packed = _files(cache)
    assert packed and all(name.startswith(f"{PACKS}/") for name in packed)
    assert _pack_keys(cache) == used
    section = _measure_section(first)["cache"]
    assert section["used_keys"] == len(used) and section["compacted"]["dropped"] == len(other)
    _check_second_run_served_from_cache(first, second, cache, packed)


def test_choir_keeps_its_embeddings_and_ensemble_draws(make_cfg, tmp_path: Path) -> None:
    members = ", ".join(
        f"{{backend: sim, name: m{i}, agent: freelist, params: {{signature: {i + 1}}}}}" for i in range(2)
    )
    first, second = _twice(
        make_cfg,
        tmp_path,
        "study=choir",
        f"study.ensemble.members=[{members}]",
        "study.question_ids=[H001,H003]",
        "study.templates=[A]",
        "study.personas=[archivist]",
        "study.temperatures=[1.0]",
        "study.generations=2",
        "study.items_per_list=8",
        "study.embedder.kind=sim",
    )
    cache = tmp_path / "cache"
    packed = _files(cache)
    assert all(name.startswith(f"{PACKS}/") for name in packed)
    kinds = {json.loads(line)["value"].__class__.__name__ for b in packed.values() for line in b.splitlines()}
    assert kinds == {"str", "dict"}  # the draws and the embedding vectors
    assert _pack_keys(cache) == set((first / KEYS_FILE).read_text().split())
    _check_second_run_served_from_cache(first, second, cache, packed)


def test_a_failed_measurement_compacts_nothing(make_cfg, tmp_path: Path, monkeypatch) -> None:
    from lmaudit.backends.cached import CachedBackend

    run(make_cfg("model=sim_mixture", "stage=measure", "mlflow.enabled=false", name="old"))
    before = _files(tmp_path / "cache")

    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the server went away")

    monkeypatch.setattr(CachedBackend, "sample", broken)
    cfg = make_cfg(
        "model=sim_projective", "stage=measure", "paths.cache_compact=true", "mlflow.enabled=false"
    )
    with pytest.raises(RuntimeError, match="went away"):
        run(cfg)
    after = _files(tmp_path / "cache")
    assert before.items() <= after.items()  # the earlier run's entries are all still there
    assert not (tmp_path / "run" / KEYS_FILE).exists()
