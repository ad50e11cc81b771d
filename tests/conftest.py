from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from lmaudit.config.overrides import canonical
from lmaudit.config.store import register_configs

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"

register_configs()


@pytest.fixture
def make_cfg(tmp_path: Path) -> Iterator[Callable[..., DictConfig]]:
    """Compose the real config (conf/) with overrides (short spellings as run.py takes them);
    outputs go under tmp_path."""

    def _make(*overrides: str, name: str = "run") -> DictConfig:
        args, study = canonical(list(overrides))
        base = [
            f"paths.results={tmp_path / 'results'}",
            f"paths.cache={tmp_path / 'cache'}",
            f"paths.mlruns={tmp_path / 'mlruns'}",
            f"paths.registrations={CONF / 'prereg'}",
            f"out_dir={tmp_path / name}",
            "progress=false",
        ]
        reg = next((a.split("=", 1)[1] for a in args if a.startswith("prereg=")), None)
        if reg is not None:  # a registration may select its study in its defaults list
            text = (CONF / "prereg" / f"{reg}.yaml").read_text()
            study = next(
                (ln.split(":")[1].strip() for ln in text.splitlines() if "override /study:" in ln), study
            )
        if study == "qq":
            base.append(f"study.items.path={REPO / 'data/qq/items/pilot.json'}")
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return compose(config_name="config", overrides=[*base, *args])

    yield _make


class StubState:
    """What the stub OpenAI server does: ``delay`` seconds before each POST answer."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.posts = 0
        # a draw request (chat, no logprobs) this says True of is answered as hosted APIs
        # answer a filtered one: content null, finish_reason "content_filter"
        self.refuse: Callable[[dict[str, Any]], bool] | None = None
        # a draw request is answered with these chunks as they come (no Content-Length: the
        # answer ends when the connection closes); ``sent`` counts the bytes the client took
        self.stream: Callable[[], Iterator[bytes]] | None = None
        self.sent = 0
        # a log-prob request this says True of gets top alternatives that hold none of the
        # labels (A, B, Yes, No), as a server answers when the labels fall outside its top k
        self.no_labels: Callable[[dict[str, Any]], bool] | None = None


@pytest.fixture
def openai_stub() -> Iterator[tuple[StubState, str]]:
    """A tiny OpenAI-compatible server on 127.0.0.1 (chat completions with top logprobs over
    A/B/Yes/No, sampled answers "A", a llama-cpp-python tokenize API); yields its state and its
    ``/v1`` base URL."""
    import json
    import math
    import re
    import time

    from http_stub import JsonHandler, serving

    state = StubState()
    top = {"A": 0.45, "B": 0.35, "Yes": 0.1, "No": 0.08, "C": 0.02}
    words = {"Yes": 2, "No": 3}

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": "toy", "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            state.posts += 1
            if state.delay:
                time.sleep(state.delay)
            if self.path.endswith("/extras/tokenize"):  # one token per character, but Yes and No
                pieces = re.findall(r"Yes|No|.", body["input"], flags=re.S)
                self._send({"tokens": [1] + [words[p] if p in words else ord(p) + 10 for p in pieces]})
            elif self.path.endswith("/extras/detokenize"):
                back = {v: k for k, v in words.items()}
                self._send({"text": "".join(back.get(t) or chr(t - 10) for t in body["tokens"] if t > 1)})
            elif self.path.endswith("/chat/completions") and body.get("logprobs"):
                mine = {"Maybe": 0.6, "Unsure": 0.3} if state.no_labels and state.no_labels(body) else top
                tops = [
                    {"token": t, "logprob": math.log(p), "id": 100 + i}
                    for i, (t, p) in enumerate(mine.items())
                ]
                lp = {"content": [{"token": "A", "logprob": math.log(0.45), "top_logprobs": tops}]}
                self._send({"choices": [{"index": 0, "message": {"content": "A"}, "logprobs": lp}]})
            elif self.path.endswith("/chat/completions") and state.stream is not None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                try:
                    for chunk in state.stream():
                        self.wfile.write(chunk)
                        state.sent += len(chunk)
                except OSError:  # the client closed the connection
                    pass
            elif self.path.endswith("/chat/completions") and state.refuse is not None and state.refuse(body):
                message = {"role": "assistant", "content": None}
                self._send({"choices": [{"index": 0, "message": message, "finish_reason": "content_filter"}]})
            elif self.path.endswith("/chat/completions"):
                self._send({"choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}}]})
            else:
                self._send({"detail": "Not Found"}, 404)

    with serving(Handler) as port:
        yield state, f"http://127.0.0.1:{port}/v1"
