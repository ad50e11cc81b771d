"""OpenAIBackend against a real llama-cpp-python server serving the embedded Gemma 3 270M GGUF.

Needs ``llama-cpp-python[server]`` (``scripts/install_llama_server.sh``; CI installs it).
The server is started once per module as a subprocess and terminated in the finalizer.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llama_server import ALIAS, free_port, gguf_path, server_command, serving
from lmaudit.backends.base import LabelRequest, SampleRequest
from lmaudit.backends.hf.embedded import GEMMA3_CHAT_TEMPLATE
from lmaudit.backends.openai.backend import OpenAIBackend

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

SYSTEM = (
    'You are asked a series of judgment questions. For each question, answer with exactly one letter: "A" or "B". '
    "Do not explain."
)
QQ_PROMPTS = [
    (
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "A = yes, B = no.\nIs Paris the capital of France?"},
    ),
    (
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "A = yes, B = no.\nIs honesty a virtue?"},
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "A = yes, B = no.\nIs kindness a virtue?"},
    ),
    ({"role": "user", "content": "Answer with A (yes) or B (no). Is the sky green?"},),
]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama_cpp is not importable: run scripts/install_llama_server.sh (CI installs it)")
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    with serving(server_command(gguf_path(), port), log_path, port) as url:
        yield url


def _backend(base_url: str, **cfg: Any) -> OpenAIBackend:
    return OpenAIBackend({
        "base_url": base_url, "model": ALIAS, "endpoint": "completions", "chat_template": GEMMA3_CHAT_TEMPLATE,
        "revision": "embedded-q4_k_m", "timeout_s": 120, **cfg,
    })  # fmt: skip


def test_label_logprobs_completions(llama_server: str) -> None:
    backend = _backend(llama_server)
    reqs = [LabelRequest(messages=m, labels=("A", "B")) for m in QQ_PROMPTS]
    results = backend.label_logprobs(reqs, top_k=20)
    for res in results:
        assert len(res.top_k) == 20, "the server must return top-20 alternatives"
        probs = [p for _, p in res.top_k]
        assert probs == sorted(probs, reverse=True) and all(0.0 <= p <= 1.0 for p in probs)
        assert sum(probs) <= 1.0 + 1e-4
        assert all(0.0 <= p <= 1.0 for p in res.probs.values())
        assert math.isclose(res.other, 1.0 - sum(res.probs.values()), abs_tol=1e-6)
        # each label's probability is exactly its top-k entry (or 0.0 when absent)
        top = dict(reversed(res.top_k))  # first (likeliest) entry wins on duplicate texts
        for label, p in res.probs.items():
            assert p == pytest.approx(top.get(label, 0.0))
    # an instruction-following answer position: the labels carry visible mass somewhere
    assert max(sum(r.probs.values()) for r in results) > 0.05


def test_g1_single_tokens_via_tokenize_endpoint(llama_server: str) -> None:
    backend = _backend(llama_server)
    for messages in QQ_PROMPTS:
        pieces = backend.check_single_token(LabelRequest(messages=messages, labels=("A", "B", "Yes", "No")))
        assert pieces["A"] == ["A"] and pieces["B"] == ["B"]
        assert all(len(p) == 1 for p in pieces.values()), pieces
    assert backend._tok_dialect == "llama-cpp-python"
    # a label that is not one token in context fails
    multi = backend.check_single_token(LabelRequest(messages=QQ_PROMPTS[0], labels=("Absolutely not",)))
    assert len(multi["Absolutely not"]) > 1


def test_sampling_returns_n_texts(llama_server: str) -> None:
    for endpoint in ("completions", "chat"):
        backend = _backend(llama_server, endpoint=endpoint)
        reqs = [SampleRequest(messages=QQ_PROMPTS[0], n=3, temperature=1.0, max_tokens=3, seed=7)]
        (res,) = backend.sample(reqs)
        assert len(res.texts) == 3 and all(isinstance(t, str) for t in res.texts)
    # draws are keyed by seed: distinct seeds give distinct draws, the same seed the same draw.
    # llama-cpp-python reuses its KV cache when a prompt repeats, which perturbs the float results,
    # so draws reproduce only from the same server state: warm up once, then compare.
    backend = _backend(llama_server)
    req = SampleRequest(messages=QQ_PROMPTS[2], n=6, temperature=1.0, max_tokens=4, seed=3)
    (warm,) = backend.sample([req])
    assert len(set(warm.texts)) > 1
    assert backend.sample([req]) == backend.sample([req])


def test_top1_agrees_with_hf_backend(llama_server: str) -> None:
    from lmaudit.backends.registry import build_backend

    hf = build_backend({
        "backend": "hf", "name": ALIAS, "model": "embedded:gemma3-270m", "dtype": "float32",
        "chat_template": GEMMA3_CHAT_TEMPLATE, "batch_size": 4, "base_model": True,
    })  # fmt: skip
    reqs = [LabelRequest(messages=m, labels=("A", "B")) for m in QQ_PROMPTS]
    llama = _backend(llama_server).label_logprobs(reqs, top_k=5)
    ref = hf.label_logprobs(reqs, top_k=5)
    checked = 0
    for a, b in zip(llama, ref, strict=True):
        (t1, p1), (_, p2) = a.top_k[0], a.top_k[1]
        if p1 - p2 < 0.1:  # a near tie can flip between Q4 kernels and dequantised float32
            continue
        assert t1 == b.top_k[0][0], (a.top_k[:3], b.top_k[:3])
        checked += 1
    # the prompts are fixed and the model is fixed: some must have a clear top token
    assert checked >= 1, "every prompt was a near tie at the top: the comparison checked nothing"


def _readme_command() -> list[str]:
    """The served-model command the README shows (python run.py model=llamacpp ...)."""
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith("python run.py model=llamacpp model.base_url="):
            return shlex.split(line.split("#")[0])
    raise AssertionError("README.md shows no 'python run.py model=llamacpp model.base_url=...' command")


def test_readme_command_decides_g1_and_completes(llama_server: str, tmp_path: Path) -> None:
    cmd = [
        f"model.base_url={llama_server}" if a.startswith("model.base_url=") else a for a in _readme_command()
    ]
    assert cmd[:3] == ["python", "run.py", "model=llamacpp"] and f"model.model={ALIAS}" in cmd
    proc = subprocess.run(
        [sys.executable, *cmd[1:], "mlflow.enabled=false", "progress=false", "items.ids=[s1-01]",
         f"out_dir={tmp_path / 'run'}", f"paths.cache={tmp_path / 'cache'}"],
        cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cannot tokenize" not in proc.stderr and "unverified" not in proc.stderr
    g1 = json.loads((tmp_path / "run" / "results.json").read_text())["gates"]["G1"]
    # decided by the server's tokenizer in the context posted: A and B are one token each
    assert g1["status"] == "PASS" and g1["checked"] == 12, g1
    assert g1["label_pieces"] == [{"label": "A", "pieces": ["A"]}, {"label": "B", "pieces": ["B"]}]
