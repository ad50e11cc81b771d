"""inspect_ai's ``openai-api`` provider against a real llama-cpp-python server serving the embedded
Gemma 3 270M GGUF, epochs 5 at temperature 1; the log is then audited with ``run.py``.

Needs ``llama-cpp-python[server]`` (``scripts/install_llama_server.sh``) and ``openai`` (which
inspect's provider uses); skipped without them.
The server start-up is tests/llama_server.py's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from draws_interop_helpers import run_inspect

from llama_server import free_port, gguf_path, server_command, serving
from lmaudit.studies.registry import get_study

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("inspect_env")]

REPO = Path(__file__).resolve().parents[2]
SERVICE = "llamacpp"  # inspect reads LLAMACPP_BASE_URL and LLAMACPP_API_KEY
SERVER_MODULES = (
    "llama_cpp",
    "fastapi",
    "uvicorn",
    "sse_starlette",
    "pydantic_settings",
    "starlette_context",
)


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama-cpp-python[server] is not installed (missing {', '.join(missing)})")
    pytest.importorskip("inspect_ai")
    if importlib.util.find_spec("openai") is None:
        pytest.skip("inspect_ai's openai-api provider needs the openai package (pip install openai)")
    port = free_port()
    # the GGUF has no chat template: the server applies llama-cpp-python's gemma format
    cmd = [*server_command(gguf_path(), port), "--chat_format", "gemma"]
    with serving(cmd, tmp_path_factory.mktemp("llama") / "server.log", port) as url:
        yield url


def _audit(log_dir: Path, out: Path, tmp_path: Path) -> dict:
    """``python run.py study=draws study.import_path=<log_dir>``, as a user runs it."""
    cmd = [
        sys.executable, "run.py", "study=draws", f"study.import_path={log_dir}", f"out_dir={out}",
        f"paths.cache={tmp_path / 'cache'}", f"paths.mlruns={tmp_path / 'mlruns'}",
        "study.permutations=999", "study.sims_per_step=100", "progress=false",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "log audit (inspect)" in proc.stdout
    return json.loads((out / "results.json").read_text())


def test_epochs_from_a_real_server_are_audited(llama_url, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LLAMACPP_BASE_URL", llama_url)
    monkeypatch.setenv("LLAMACPP_API_KEY", "none")
    model = f"openai-api/{SERVICE}/gemma3-270m"
    log = run_inspect(
        tmp_path / "logs", model, n_samples=6, epochs=5, mark_epoch=False, temperature=1.0, max_tokens=4
    )
    res = _audit(tmp_path / "logs", tmp_path / "run", tmp_path)

    audit = res["log_audit"]
    assert list(res["families"]) == [model] and audit["families"][model]["temperature"] == ["1"]
    assert audit["n_excluded"] == 0 and audit["greedy_families"] == [] and "same_seed" not in audit["totals"]
    (src,) = audit["files"]
    assert src["files"] == [log.name] and src["counts"]["draws"] == 30 and src["facts"]["epochs"] == 5
    metrics = get_study("draws").result(json.loads((tmp_path / "run" / "results.json").read_text())).metrics
    assert metrics["log_audit.n_files"] == 1.0 and metrics["n_sequences"] == 6.0


def test_a_shared_cache_against_a_real_server_is_caught(llama_url, tmp_path, monkeypatch) -> None:
    """Concurrent epochs of a fresh run all miss a per_epoch=False cache (real draws, kept); a
    second run of the same eval reads every epoch from it (copies, left out)."""
    from inspect_ai.model import CachePolicy

    monkeypatch.setenv("LLAMACPP_BASE_URL", llama_url)
    monkeypatch.setenv("LLAMACPP_API_KEY", "none")
    model = f"openai-api/{SERVICE}/gemma3-270m"
    shared = {"temperature": 1.0, "max_tokens": 4, "cache": CachePolicy(per_epoch=False)}
    first = run_inspect(tmp_path / "logs" / "a", model, n_samples=4, epochs=5, mark_epoch=False, **shared)
    again = run_inspect(tmp_path / "logs" / "b", model, n_samples=4, epochs=5, mark_epoch=False, **shared)
    res = _audit(tmp_path / "logs", tmp_path / "run", tmp_path)

    audit = res["log_audit"]
    by_file = {f["files"][0]: f for f in audit["files"]}
    assert by_file[f"b/{again.name}"]["counts"]["sequences_emptied"] == 4  # every epoch a copy
    assert (
        audit["totals"]["cache_copies"]
        == 4 * 5
        + by_file[f"a/{first.name}"]["counts"]["draws_read"]
        - (by_file[f"a/{first.name}"]["counts"]["draws"])
    )
    assert audit["totals"]["cache_shared_across_epochs"] == 2
    assert res["families"][model]["n_draws"] == by_file[f"a/{first.name}"]["counts"]["draws"]
