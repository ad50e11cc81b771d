"""Gate G1 per served model config (conf/model/{llamacpp,vllm,ollama,openai}.yaml): decided
where the server can tokenize and shows the rendered context, refused at once elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_openai_backend import Fake, serve

from lmaudit.backends.base import LabelRequest
from lmaudit.backends.openai.backend import OpenAIBackend
from lmaudit.errors import BackendError
from lmaudit.pipeline import run

REPO = Path(__file__).resolve().parents[2]
MESSAGES = ({"role": "system", "content": "Answer A or B."}, {"role": "user", "content": "Is it A?"})


@pytest.fixture
def bare() -> Iterator[tuple[Fake, str]]:
    """An OpenAI-compatible server with no tokenize endpoint (as Ollama or a hosted API)."""
    fake = Fake(tokenize=None)
    with serve(fake) as url:
        yield fake, url


def test_ollama_refuses_qq_in_one_line_before_any_request(bare: tuple[Fake, str], tmp_path: Path) -> None:
    fake, url = bare
    proc = subprocess.run(
        [sys.executable, "run.py", "model=ollama", f"model.base_url={url}", "model.model=toy",
         "mlflow.enabled=false", "progress=false", f"out_dir={tmp_path / 'run'}", f"paths.cache={tmp_path / 'c'}"],
        cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith("error: qq cannot run on this server: ") and "no tokenize endpoint" in lines[0]
    assert "draws, choir and judge's verdicts" in lines[0] and "docs/servers.md" in lines[0]
    assert fake.seen == []  # not one POST: no tokenize probe, no label asked
    assert not (tmp_path / "run" / "measurements.jsonl").exists()


def test_hosted_openai_refuses_qq_before_any_request(bare: tuple[Fake, str], make_cfg: Any) -> None:
    fake, url = bare
    cfg = make_cfg("model=openai", f"model.base_url={url}", "model.model=toy", "mlflow.enabled=false")
    with pytest.raises(BackendError, match=r"^qq cannot run on this server: .* no tokenize endpoint"):
        run(cfg)
    assert fake.seen == []


def test_auto_probe_finding_no_tokenizer_refuses_before_any_label(
    bare: tuple[Fake, str], make_cfg: Any
) -> None:
    fake, url = bare
    cfg = make_cfg(
        "model=openai",
        f"model.base_url={url}",
        "model.model=toy",
        "model.tokenizer=auto",
        "mlflow.enabled=false",
    )
    with pytest.raises(
        BackendError, match=r"no tokenize endpoint answered at http://127\.0\.0\.1:\d+ \(tried"
    ):
        run(cfg)
    assert fake.seen and all(r["path"] in ("/extras/tokenize", "/tokenize") for r in fake.seen)


def test_llamacpp_chat_mode_on_llama_cpp_python_says_the_context_is_unseen(make_cfg: Any) -> None:
    fake = Fake(tokenize="llama-cpp-python")
    with serve(fake) as url:
        cfg = make_cfg(
            "model=llamacpp", f"model.base_url={url}", "model.model=toy", "model.endpoint=chat",
            "model.chat_template=null", "mlflow.enabled=false",
        )  # fmt: skip
        with pytest.raises(BackendError, match="shows the rendered context nowhere"):
            run(cfg)
    assert not [r for r in fake.seen if "completions" in r["path"]]


def test_llamacpp_config_decides_g1_with_the_servers_tokenizer(make_cfg: Any) -> None:
    fake = Fake(tokenize="llama-cpp-python")
    with serve(fake) as url:
        cfg = make_cfg("model=llamacpp", f"model.base_url={url}", "model.model=toy")
        b = OpenAIBackend(dict(cfg.model))
        assert b.label_check_refusal() is None
        pieces = b.check_single_token(LabelRequest(messages=MESSAGES, labels=("A", "Yes")))
    assert pieces == {"A": ["A"], "Yes": ["Y", "e", "s"]}  # the fake tokenizes one token per character
    posted = [r for r in fake.seen if r["path"] == "/extras/tokenize"]
    assert posted[-1]["body"]["input"].endswith("<start_of_turn>model\nYes")  # Gemma 3's turn format


# --- vLLM: the server's own chat template, read back through /tokenize and /detokenize ---------


def _vllm(seen: list[dict[str, Any]], lossy: bool = False) -> type[BaseHTTPRequestHandler]:
    """/tokenize (prompt or messages, rendered by the server's template) and /detokenize, one
    token per character; ``lossy``: /detokenize drops the template's marker."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, body: Any, status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send({"data": [{"id": "toy"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "body": body})
            if self.path == "/tokenize" and "messages" in body:
                text = "".join(f"[{m['role']}]{m['content']}\n" for m in body["messages"]) + "[assistant]"
                self._send({"tokens": [ord(c) for c in text]})
            elif self.path == "/tokenize" and "prompt" in body:
                self._send({"tokens": [ord(c) for c in body["prompt"]], "token_strs": list(body["prompt"])})
            elif self.path == "/detokenize":
                text = "".join(chr(t) for t in body["tokens"])
                self._send({"prompt": text.replace("[assistant]", "") if lossy else text})
            else:
                self._send({"detail": "Not Found"}, 404)

    return Handler


@pytest.mark.parametrize("lossy", [False, True])
def test_vllm_chat_mode_checks_labels_after_the_servers_rendering(make_cfg: Any, lossy: bool) -> None:
    seen: list[dict[str, Any]] = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _vllm(seen, lossy))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        cfg = make_cfg("model=vllm", f"model.base_url={url}", "model.model=toy")
        b = OpenAIBackend(dict(cfg.model))
        if lossy:  # the text given back is not what the model reads: no decision from it
            assert "did not show the rendered context" in str(b.label_check_refusal())
            return
        assert b.label_check_refusal() is None
        pieces = b.check_single_token(LabelRequest(messages=MESSAGES, labels=("A", "No")))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert pieces == {"A": ["A"], "No": ["N", "o"]}
    prompts = [r["body"]["prompt"] for r in seen if "prompt" in r["body"]]
    assert prompts[-1] == "[system]Answer A or B.\n[user]Is it A?\n[assistant]No"
    assert not [r for r in seen if "completions" in r["path"]]
