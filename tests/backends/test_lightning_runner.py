"""The Lightning runner (``model.runner=lightning``) on tiny random models built in the test.

Fresh label probabilities agree with the in-process backend's within 1e-5 on any device or
process layout, and the label tokens and top-k tokens are the same; draws are identical (each
draw's seed is fixed by its key, on one host and configuration); answers read back from a
shared cache are the stored ones byte for byte; and how a model runs never enters its identity,
a cache key or the plan (the determinism contract of docs/architecture.md).
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("pytorch_lightning")

from tiny_hf import WORDS, qq_requests, write_model, write_tokenizer  # noqa: E402

from lmaudit.backends.base import SampleRequest, identity_digest  # noqa: E402
from lmaudit.backends.cached import CachedBackend  # noqa: E402
from lmaudit.backends.registry import build_backend  # noqa: E402
from lmaudit.config.checks import validate  # noqa: E402
from lmaudit.errors import ConfigRangeError  # noqa: E402
from lmaudit.provenance.cache import ResponseCache, cache_key  # noqa: E402

TOL = 1e-5  # fresh label probabilities, any runner or process layout


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-lightning")
    tok = write_tokenizer(path)
    write_model(path, "gemma3", len(tok))
    return path


def _cfg(path: Path, **execution: Any) -> dict[str, Any]:
    return {"backend": "hf", "name": "tiny", "model": str(path), "dtype": "float32", **execution}


def _samples() -> list[SampleRequest]:
    out = []
    for i in range(5):
        msgs = ({"role": "user", "content": f"answer with one letter {WORDS[4 + i]} {WORDS[20 + i]}"},)
        out.append(SampleRequest(msgs, n=6, temperature=1.0, max_tokens=1, seed=11 + i))
        out.append(SampleRequest(msgs, n=2, temperature=0.8, top_p=0.9, max_tokens=3, seed=i))
    return out


def _measure(cfg: dict[str, Any], cache_dir: Path) -> tuple[list[Any], list[Any], Any]:
    backend = build_backend(cfg)
    try:
        cached = CachedBackend(backend, ResponseCache(cache_dir), progress=False)
        labels = cached.label_logprobs(qq_requests(4), top_k=5)
        # a call with fewer requests than ranks (as gate G3 makes) leaves a rank without work
        draws = cached.sample(_samples()) + cached.sample(
            [SampleRequest(_samples()[0].messages, n=3, seed=99)]
        )
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    return labels, draws, backend


def _assert_equal(got: tuple[list[Any], list[Any], Any], ref: tuple[list[Any], list[Any], Any]) -> None:
    for g, r in zip(got[0], ref[0], strict=True):
        assert g.label_token_ids == r.label_token_ids
        assert max(abs(g.probs[k] - r.probs[k]) for k in r.probs) <= TOL
        assert abs(g.other - r.other) <= TOL
        assert [t for t, _ in g.top_k] == [t for t, _ in r.top_k]
    assert [d.texts for d in got[1]] == [d.texts for d in ref[1]]


def test_runner_settings_change_neither_identity_nor_cache_keys(tiny: Path) -> None:
    plain = build_backend(_cfg(tiny))
    run = _cfg(tiny, runner="lightning", devices=4, num_nodes=1, strategy="ddp", precision="32-true")
    runner = build_backend(run)
    assert runner.identity == plain.identity
    req = qq_requests(1)[0]
    payload = {**req.payload(False), "top_k": 5}
    assert cache_key(identity_digest(runner.identity), payload) == cache_key(
        identity_digest(plain.identity), payload
    )
    # a mixed precision computes under autocast: another arithmetic, another identity
    mixed = build_backend(_cfg(tiny, runner="lightning", precision="bf16-mixed"))
    assert mixed.identity["autocast"] == "bf16-mixed"
    assert runner._procs == [] and runner._pool is None  # no worker starts before a request


def test_runner_settings_stay_out_of_the_plan(make_cfg: Any) -> None:
    from lmaudit.studies.qq.study import QQStudy

    base = QQStudy().plan_config(make_cfg())
    run = QQStudy().plan_config(make_cfg("model.runner=lightning", "model.devices=2"))
    assert run == base and "runner" not in base["model"]


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        (["model.devices=0"], "model.devices"),
        (["model.devices=2"], "model.devices = 2 needs model.runner=lightning"),
        (["model.runner=slurm"], "model.runner"),
        (["model.runner=lightning", "model.strategy=deepspeed"], "model.strategy"),
        (["model.runner=lightning", "model.precision=bf16-true"], "model.precision = 'bf16-true'"),
    ],
)
def test_execution_fields_are_range_checked(make_cfg: Any, overrides: list[str], names: str) -> None:
    with pytest.raises(ConfigRangeError, match=names.replace(".", r"\.").replace("(", r"\(")):
        validate(make_cfg(*overrides))


def test_devices_1_equals_in_process(tiny: Path, tmp_path: Path) -> None:
    ref = _measure(_cfg(tiny), tmp_path / "ref")
    got = _measure(_cfg(tiny, runner="lightning", devices=1, accelerator="cpu"), tmp_path / "run")
    _assert_equal(got, ref)
    assert got[2].jobs == 3 and got[2].stats.requests == len(qq_requests(4)) + len(_samples()) + 1


def test_devices_2_equals_in_process_and_resumes(tiny: Path, tmp_path: Path) -> None:
    """Two CPU processes (gloo) over several scoring units: answers within 1e-5; a rerun over
    the filled cache starts no worker and returns the stored answers exactly."""
    ref = _measure(_cfg(tiny, unit_tokens=40), tmp_path / "ref")
    run = _cfg(tiny, runner="lightning", devices=2, accelerator="cpu", unit_tokens=40)
    got = _measure(run, tmp_path / "run")
    _assert_equal(got, ref)
    assert got[2].describe()["runner"]["devices"] == 2
    assert got[2].stats.requests == ref[2].stats.requests  # no unit computed twice
    again = _measure(run, tmp_path / "run")  # every answer cached: no worker is started
    assert again[2].jobs == 0
    # from a shared cache: the same values, bit for bit, whichever runner reads it
    stored = [(g.probs, g.other, g.top_k) for g in got[0]]
    assert [(g.probs, g.other, g.top_k) for g in again[0]] == stored
    plain = _measure(_cfg(tiny, unit_tokens=40), tmp_path / "run")
    assert [(g.probs, g.other, g.top_k) for g in plain[0]] == stored and plain[2].stats.requests == 0
    assert [d.texts for d in again[1]] == [d.texts for d in got[1]]


def test_a_partly_filled_cache_is_completed(tiny: Path, tmp_path: Path) -> None:
    """What a killed run leaves (some answers stored) is kept; only the rest is computed."""
    cache = tmp_path / "cache"
    reqs = qq_requests(4)
    CachedBackend(build_backend(_cfg(tiny)), ResponseCache(cache), progress=False).label_logprobs(
        reqs[:5], top_k=5
    )
    backend = build_backend(_cfg(tiny, runner="lightning", devices=2, accelerator="cpu"))
    try:
        rc = ResponseCache(cache)
        got = CachedBackend(backend, rc, progress=False).label_logprobs(reqs, top_k=5)
    finally:
        backend.close()
    # the 5 stored answers are served, the workers computed and wrote the other 19
    assert backend.stats.requests == len(reqs) - 5 and rc.stats.writes == 0
    assert all(isinstance(g.probs, dict) for g in got)


@pytest.mark.gpu
def test_two_gpus_equal_one_process(tiny: Path, tmp_path: Path) -> None:
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA devices")
    ref = _measure(_cfg(tiny, runner="lightning", devices=1, accelerator="gpu"), tmp_path / "one")
    got = _measure(_cfg(tiny, runner="lightning", devices=2, accelerator="gpu"), tmp_path / "two")
    _assert_equal(got, ref)


@pytest.mark.gpu
def test_fsdp_on_two_gpus_equals_ddp(tiny: Path, tmp_path: Path) -> None:
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA devices")
    ref = _measure(_cfg(tiny, runner="lightning", devices=2, accelerator="gpu"), tmp_path / "ddp")
    got = _measure(
        _cfg(tiny, runner="lightning", devices=2, accelerator="gpu", strategy="fsdp"), tmp_path / "fsdp"
    )
    _assert_equal(got, ref)


def test_label_shards_are_whole_scoring_units_in_contiguous_runs(tiny: Path) -> None:
    from lmaudit.backends.hf.packed.trie import scoring_units

    runner = build_backend(_cfg(tiny, runner="lightning", devices=2, unit_tokens=40))
    seen: list[Any] = []
    runner._run = lambda root, shards: seen.extend(shards)  # type: ignore[method-assign]
    reqs = qq_requests(4)
    runner.fill_labels(Path("/nonexistent"), [(str(i), r) for i, r in enumerate(reqs)], 5)
    units = scoring_units([runner.hf.encode(r.messages) for r in reqs], 40)
    assert len(units) >= 4
    # one shard per unit, in the order of the units; Lightning deals shard j to rank j % 2
    assert [s["kind"] for s in seen] == ["labels"] * len(seen) and len(seen) % 2 == 0
    nonempty = [[int(it["key"]) for it in s["items"]] for s in seen if s["items"]]
    per_rank = [[int(it["key"]) for s in seen[r::2] for it in s["items"]] for r in range(2)]
    assert sorted(nonempty) == sorted(units)
    # each rank answers a contiguous run of whole units: together they are the units in order
    assert per_rank[0] + per_rank[1] == [i for unit in units for i in unit]
    assert per_rank[0] and per_rank[1]
