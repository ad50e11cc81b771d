"""A checkpoint's identity holds what the model is, not where it is: a local folder whose weights
change in place, and a hub id whose branch moves, are measured afresh, never served the answers
of the weights they held before (lm-evaluation-harness #2715, #4063)."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_hf import make_backend, max_prob_diff, one_thread, qq_requests, tiny_checkpoint  # noqa: E402

from lmaudit.backends.base import identity_digest  # noqa: E402
from lmaudit.backends.cached import CachedBackend  # noqa: E402
from lmaudit.backends.hf.checkpoint import folder_digest, resolve  # noqa: E402
from lmaudit.errors import BackendError  # noqa: E402
from lmaudit.pipeline import run  # noqa: E402
from lmaudit.provenance.cache import ResponseCache  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


@pytest.fixture(autouse=True)
def _digest_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Remembered file digests go to the test's folder, not the user's cache."""
    monkeypatch.setenv("LMAUDIT_DIGEST_STATE", str(tmp_path / "file-digests.json"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny-gemma3"), "gemma3")


def scale_one_layer(folder: Path, factor: float = 3.0) -> None:
    """What a fine-tuning run saving into the same folder does: one layer's weights changed, the
    file rewritten in place under its name (same size, same path)."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    # through the activation's nonlinearity (Gemma 3's norms would undo a scale of a linear path)
    name = next(k for k in tensors if "layers.0.mlp.gate_proj.weight" in k)
    tensors[name] = tensors[name] * factor
    size = path.stat().st_size
    save_file(tensors, str(path), metadata={"format": "pt"})
    assert path.stat().st_size == size


def _qq(make_cfg: Any, model: Path, name: str) -> Path:
    cfg = make_cfg(
        "model=gemma3_270m",
        f"model.model={model}",
        "model.chat_template=null",  # the tiny tokenizer's own template
        "study.items.ids=[s1-01,s3-01]",
        "study.gates.g3.enabled=false",
        "mlflow.enabled=false",
        name=name,
    )
    run(cfg)
    return Path(cfg.out_dir)


def _positions(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if r["kind"] == "position"]


def _log_gap(x: dict[str, Any], y: dict[str, Any]) -> float:
    return max(abs(math.log(x["probs"][k] / y["probs"][k])) for k in x["probs"])


def test_weights_changed_in_place_are_measured_afresh(make_cfg: Any, tmp_path: Path, tiny: Path) -> None:
    model = tmp_path / "checkpoint"
    shutil.copytree(tiny, model)
    first = _qq(make_cfg, model, "first")
    scale_one_layer(model)
    second = _qq(make_cfg, model, "second")  # the same config, the same response cache

    a1 = json.loads((first / "audit_record.json").read_text())["measure"]
    a2 = json.loads((second / "audit_record.json").read_text())["measure"]
    assert a1["backend_digest"] != a2["backend_digest"]
    assert a2["cache"]["misses"] > 0 and a2["cache"]["misses"] == a1["cache"]["misses"]
    # measured afresh: other weights, other answers (log-probabilities apart by far more than
    # the determinism contract's 1e-5)
    rows1, rows2 = (_positions(d / "measurements.jsonl") for d in (first, second))
    assert [r["item"] for r in rows1] == [r["item"] for r in rows2] and rows1
    assert max(_log_gap(x, y) for x, y in zip(rows1, rows2, strict=True)) > 1e-2
    # the audit record says what the identity stood for: the files and their digests
    ckpt = a2["backend"]["checkpoint"]
    assert ckpt["kind"] == "folder" and a2["backend_identity"]["revision"] == f"sha256:{ckpt['sha256']}"
    assert (
        ckpt["files"]["model.safetensors"]["sha256"]
        != a1["backend"]["checkpoint"]["files"]["model.safetensors"]["sha256"]
    )


def test_the_same_files_elsewhere_are_the_same_model(tmp_path: Path, tiny: Path) -> None:
    here, there = tmp_path / "a" / "ckpt", tmp_path / "b" / "ckpt"
    shutil.copytree(tiny, here)
    shutil.copytree(tiny, there)
    ident = make_backend(here).identity
    assert make_backend(there).identity == ident  # a copy on another host serves the same answers
    assert str(here) not in json.dumps(ident)
    (there / "tokenizer_config.json").write_text(
        (there / "tokenizer_config.json").read_text().replace('"<unk>"', '"<pad>"', 1)
    )
    assert identity_digest(make_backend(there).identity) != identity_digest(ident)  # a tokenizer file
    (here / "README.md").write_text("notes about the run")  # documentation is not what is loaded
    assert make_backend(here).identity == ident


def test_the_folder_digest_is_the_files_digests(tmp_path: Path, tiny: Path) -> None:
    """An independent computation: hashlib over each file, then over the sorted name -> digest map."""
    import hashlib

    digest, files = folder_digest(tiny)
    want = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(tiny.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }
    assert {k: v["sha256"] for k, v in files.items()} == want
    canonical = json.dumps(want, sort_keys=True, separators=(",", ":"))
    assert digest == hashlib.sha256(canonical.encode()).hexdigest()


def test_a_gguf_file_is_its_sha256(tmp_path: Path) -> None:
    """Identity only (loading a GGUF is transformers' ``gguf_file=``; the real one is slow):
    the file's SHA-256, whatever folder holds it; a GGUF inside a folder counts as its weights."""
    import hashlib

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    found = resolve(str(gguf), None)
    assert found.revision == "sha256:" + hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert (found.path, found.gguf_file, found.name) == (str(tmp_path), "m.gguf", "m.gguf")
    copy = tmp_path / "elsewhere" / "m.gguf"
    copy.parent.mkdir()
    shutil.copy(gguf, copy)
    assert resolve(str(copy), None).revision == found.revision
    with copy.open("r+b") as fh:  # one byte of the weights changed in place
        fh.seek(100)
        fh.write(b"\xff")
    assert resolve(str(copy), None).revision != found.revision
    assert "m.gguf" in resolve(str(copy.parent), None).record["files"]


def test_files_rewritten_between_identifying_and_loading_are_refused(tmp_path: Path, tiny: Path) -> None:
    model = tmp_path / "ckpt"
    shutil.copytree(tiny, model)
    backend = make_backend(model)  # identified now, loaded on first use
    scale_one_layer(model)
    with pytest.raises(BackendError, match="changed between identifying and loading"):
        backend.load()


def _hub(root: Path, repo: str, snapshots: dict[str, Path], main: str) -> None:
    """A Hugging Face hub cache as huggingface_hub lays it out: ``models--org--name/refs/main``
    naming the commit, ``snapshots/<commit>/`` holding its files."""
    folder = root / ("models--" + repo.replace("/", "--"))
    for commit, files in snapshots.items():
        shutil.copytree(files, folder / "snapshots" / commit)
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(main)


def test_a_hub_branch_that_moves_is_measured_afresh(
    tmp_path: Path, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    old, new = "1" * 40, "2" * 40
    moved = tmp_path / "moved"
    shutil.copytree(tiny, moved)
    scale_one_layer(moved)
    hub = tmp_path / "hub"
    _hub(hub, "org/tiny", {old: tiny, new: moved}, main=old)
    # where huggingface_hub and transformers look for the hub cache (HF_HUB_CACHE, read at import)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    cache = ResponseCache(tmp_path / "responses")
    requests = qq_requests(2)

    before = make_backend("org/tiny")
    assert before.identity["revision"] == old and before.describe()["checkpoint"]["commit"] == old
    first = CachedBackend(before, cache, progress=False).label_logprobs(requests, top_k=3)

    (hub / "models--org--tiny" / "refs" / "main").write_text(new)  # the branch moves
    after = make_backend("org/tiny")
    assert after.identity["revision"] == new
    cached = CachedBackend(after, cache, progress=False)
    misses = cache.stats.misses
    second = cached.label_logprobs(requests, top_k=3)
    assert cache.stats.misses - misses == len(requests)  # nothing served from the old commit
    # other weights, other answers: log-probabilities apart by far more than the 1e-5 of the
    # determinism contract (the tiny model's label probabilities are ~1e-3)
    assert max(abs(math.log(x.probs["A"] / y.probs["A"])) for x, y in zip(first, second, strict=True)) > 1e-2
    # what was loaded is what is identified: the new commit's weights, as loaded directly
    direct = make_backend(moved).label_logprobs(requests, top_k=3)
    assert max_prob_diff(direct, second) < 1e-6

    pinned = make_backend("org/tiny", revision=old)  # a pinned commit is that commit, wherever main is
    assert pinned.identity == before.identity


def test_lightning_ranks_load_what_the_run_identified(
    tmp_path: Path, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner pins the hub commit it resolved for its ranks, and a rank whose model is not
    the identified one (a folder rewritten in between) refuses to answer."""
    pytest.importorskip("pytorch_lightning")
    import huggingface_hub.constants

    from lmaudit.backends.hf.lightning.runner import Worker
    from lmaudit.backends.registry import build_backend

    old, new = "3" * 40, "4" * 40
    hub = tmp_path / "hub"
    _hub(hub, "org/tiny", {old: tiny, new: tiny}, main=old)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    execution = {"runner": "lightning", "devices": 1, "accelerator": "cpu", "strategy": "ddp"}
    runner = build_backend({"backend": "hf", "model": "org/tiny", "dtype": "float32", **execution})
    (hub / "models--org--tiny" / "refs" / "main").write_text(new)  # the branch moves meanwhile
    assert runner.model_cfg["revision"] == old and runner.identity["revision"] == old

    model = tmp_path / "ckpt"
    shutil.copytree(tiny, model)
    runner = build_backend({"backend": "hf", "model": str(model), "dtype": "float32", **execution})
    setup = {"model": runner.model_cfg, "identity": runner.hf.identity, **runner.execution}
    scale_one_layer(model)
    threads = torch.get_num_threads()
    try:
        with pytest.raises(BackendError, match="not the one the run identified"):
            Worker(setup)
    finally:
        torch.set_num_threads(threads)
