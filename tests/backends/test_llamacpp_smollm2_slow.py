"""The second embedded model behind a real llama.cpp server: the README's recipe for
SmolLM2-135M-Instruct (llama-cpp-python serving the very GGUF lmaudit converts, model=llamacpp_smollm2)
decides gate G1 with the server's tokenizer and completes, and its label probabilities (Q4_1
arithmetic) agree with the hf backend's on the dequantized weights where the top choice is clear."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from llama_server import free_port, gguf_path, server_command, serving
from lmaudit.backends.base import LabelRequest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ALIAS = "smollm2-135m"
MODEL = "embedded:smollm2-135m"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama_cpp is not importable: run scripts/install_llama_server.sh (CI installs it)")
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-smollm2") / "server.log"
    with serving(server_command(gguf_path(MODEL), port, ALIAS), log_path, port) as url:
        yield url


def _readme_commands() -> tuple[list[str], list[str]]:
    """The README's two lines for SmolLM2: the server and the run."""
    lines = (REPO / "README.md").read_text().splitlines()
    serve = next(x for x in lines if x.startswith("python -m llama_cpp.server") and "smollm2-135m" in x)
    run = next(x for x in lines if x.startswith("python run.py model=llamacpp_smollm2"))
    return shlex.split(serve), shlex.split(run)


def test_readme_recipe_serves_the_embedded_gguf_and_g1_passes(server: str, tmp_path: Path) -> None:
    serve, run = _readme_commands()
    # the server line names the file `lmaudit gguf-path smollm2-135m` prints and the alias the config uses
    assert serve[serve.index("--model") + 1] == "$(lmaudit gguf-path smollm2-135m)"
    printed = subprocess.run(
        ["lmaudit", "gguf-path", "smollm2-135m"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert Path(printed) == gguf_path(MODEL)
    assert serve[serve.index("--model_alias") + 1] == ALIAS
    cmd = [f"model.base_url={server}" if a.startswith("model.base_url=") else a for a in run]
    proc = subprocess.run(
        [sys.executable, *cmd[1:], "mlflow.enabled=false", "progress=false", "items.ids=[s1-01,s3-01]",
         f"out_dir={tmp_path / 'run'}", f"paths.cache={tmp_path / 'cache'}"],
        cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    g1 = json.loads((tmp_path / "run" / "results.json").read_text())["gates"]["G1"]
    # decided by the server's tokenizer in the ChatML context posted: every label is one token
    assert g1["status"] == "PASS" and g1["checked"] > 0, g1
    assert g1["label_pieces"] == [{"label": x, "pieces": [x]} for x in ("A", "B", "No", "Yes")]


def test_served_probabilities_agree_with_the_hf_backend(server: str) -> None:
    from lmaudit.backends.registry import build_backend

    hf = build_backend({"backend": "hf", "name": ALIAS, "model": MODEL, "batch_size": 4})
    served = build_backend(
        {"backend": "openai", "name": "llamacpp-smollm2", "base_url": server, "model": ALIAS,
         "endpoint": "completions", "chat_template": hf.chat_template, "tokenizer": "auto"}
    )  # fmt: skip
    msgs = [
        ({"role": "user", "content": f"Answer with A (yes) or B (no) only. {q}"},)
        for q in ("Is Paris the capital of France?", "Is the sky green?", "Is two more than one?")
    ]
    reqs = [LabelRequest(messages=m, labels=("A", "B")) for m in msgs]
    ours, theirs = hf.label_logprobs(reqs, top_k=5), served.label_logprobs(reqs, top_k=5)
    # Q4_1 arithmetic against the dequantized weights: the same tokens, probabilities close
    diff = max(abs(a.probs[k] - b.probs[k]) for a, b in zip(ours, theirs, strict=True) for k in ("A", "B"))
    print(f"largest |P(hf) - P(llama.cpp)| over {len(reqs)} prompts x 2 labels: {diff:.4f}")
    assert diff < 0.1
    for a, b in zip(ours, theirs, strict=True):
        (t1, p1), (_, p2) = a.top_k[0], a.top_k[1]
        if p1 - p2 >= 0.1:  # a near tie can flip between the two arithmetics
            assert t1 == b.top_k[0][0], (a.top_k[:3], b.top_k[:3])
