"""A prompt longer than the model's context is refused before any model call, in one line naming
the probe / item, its token count and the context length (never measured as if it fitted), for
the cache layer's both contracts and for draws, qq and judge through the pipeline."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_hf import WORDS, make_backend, one_thread, write_model, write_tokenizer

from lmaudit.backends.base import LabelRequest, SampleRequest
from lmaudit.backends.cached import CachedBackend
from lmaudit.errors import PromptTooLong
from lmaudit.pipeline import run
from lmaudit.provenance.cache import ResponseCache

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)
REPO = Path(__file__).resolve().parents[2]
CONTEXT = 96  # the tiny model's max_position_embeddings


@pytest.fixture(autouse=True)
def _digest_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LMAUDIT_DIGEST_STATE", str(tmp_path / "file-digests.json"))


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Gemma 3 that holds ``CONTEXT`` positions."""
    path = tmp_path_factory.mktemp("tiny-short-context")
    tok = write_tokenizer(path)
    write_model(path, "gemma3", len(tok), max_position_embeddings=CONTEXT)
    return path


def _count(model: Path, messages: list[dict[str, str]]) -> int:
    """The prompt's tokens, counted independently: transformers' own chat-template tokenization."""
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(model)).apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, return_dict=False
    )
    return len(ids)


def _chat(words: int) -> tuple[dict[str, str], ...]:
    return ({"role": "user", "content": " ".join(WORDS[4 + i % 30] for i in range(words))},)


def _fitting(model: Path, need: int) -> tuple[dict[str, str], ...]:
    """A one-turn chat of exactly ``need`` prompt tokens."""
    for words in range(1, 400):
        if _count(model, list(_chat(words))) == need:
            return _chat(words)
    raise AssertionError(f"no chat of {need} tokens")


def test_the_context_is_the_configs_max_position_embeddings(short: Path) -> None:
    assert make_backend(short).context_length() == CONTEXT


@pytest.mark.parametrize("contract", ["labels", "sample"])
def test_a_prompt_that_just_fits_is_measured_one_more_token_is_refused(
    short: Path, tmp_path: Path, contract: str
) -> None:
    max_tokens = 1 if contract == "labels" else 4  # a readout reads one next token

    def request(messages: tuple[dict[str, str], ...], item: str) -> Any:
        meta = {"item": item, "position": 1}
        if contract == "labels":
            return LabelRequest(messages, ("A", "B"), meta=meta)
        return SampleRequest(messages, n=2, max_tokens=max_tokens, seed=1, meta=meta)

    def ask(cached: CachedBackend, req: Any) -> Any:
        return cached.label_logprobs([req], top_k=2) if contract == "labels" else cached.sample([req])

    backend = make_backend(short)
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache"), progress=False)
    over = request(_fitting(short, CONTEXT - max_tokens + 1), "s1-09")
    with pytest.raises(PromptTooLong) as err:
        ask(cached, over)
    line = str(err.value)
    assert "\n" not in line and line.startswith("item 's1-09' (position 1): ")
    assert f"{CONTEXT - max_tokens + 1} tokens + {max_tokens} to generate" in line
    assert f"({CONTEXT} tokens)" in line
    assert cached.cache.stats.misses == 0 and "n_parameters" not in backend.describe()  # nothing asked

    fits = request(_fitting(short, CONTEXT - max_tokens), "s1-08")
    assert len(ask(cached, fits)) == 1 and cached.cache.stats.misses > 0


def _probes(path: Path, long_words: int) -> Path:
    rows = [
        {"id": "colour", "prompt": "Name a colour."},
        {"id": "essay", "prompt": " ".join(WORDS[4 + i % 30] for i in range(long_words))},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _model(short: Path) -> tuple[str, ...]:
    return ("model=gemma3_270m", f"model.model={short}", "model.chat_template=null", "mlflow.enabled=false")


def test_draws_refuses_a_probe_past_the_context(make_cfg: Any, tmp_path: Path, short: Path) -> None:
    probes = _probes(tmp_path / "probes.jsonl", long_words=200)
    base = ("study=draws", *_model(short), f"study.probes_path={probes}", "study.n=2", "study.replicates=1")
    # the short probe alone fits and is measured
    run(make_cfg(*base, "study.probe_ids=[colour]", name="fits"))
    assert (tmp_path / "fits" / "measurements.jsonl").exists()

    cfg = make_cfg(*base, name="long")
    with pytest.raises(PromptTooLong) as err:
        run(cfg)
    plan = json.loads((tmp_path / "long" / "plan.json").read_text())
    essay = next(r for r in plan["requests"] if r["meta"]["probe"] == "essay")
    tokens = _count(short, essay["messages"])
    assert tokens > CONTEXT
    assert str(err.value).startswith(
        f"probe 'essay' (condition 'one-word', replicate 0): the prompt is {tokens} "
    )
    assert f"({CONTEXT} tokens)" in str(err.value)
    assert not (tmp_path / "long" / "measurements.jsonl").exists()


def test_qq_refuses_an_item_past_the_context(make_cfg: Any, tmp_path: Path, short: Path) -> None:
    cfg = make_cfg(*_model(short), "study.items.ids=[s1-01]", "study.gates.g3.enabled=false", name="qq")
    with pytest.raises(
        PromptTooLong, match=r"^item 's1-01' \(.*position 1\): the prompt is \d+ tokens"
    ) as err:
        run(cfg)
    assert f"({CONTEXT} tokens)" in str(err.value)
    assert not (tmp_path / "qq" / "measurements.jsonl").exists()
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]  # nothing asked, nothing cached


def test_judge_refuses_a_packet_past_the_context(make_cfg: Any, tmp_path: Path, short: Path) -> None:
    demo = REPO / "data" / "judge" / "demo"
    cfg = make_cfg(
        "study=judge",
        *_model(short),
        f"study.candidates_path={demo / 'candidates.jsonl'}",
        f"study.mapping_path={demo / 'mapping.json'}",
        "study.k=1",
        name="judge",
    )
    with pytest.raises(
        PromptTooLong, match=r"^item .D00\d' \(condition '[^']+', replicate 0\): the prompt is"
    ):
        run(cfg)
    assert not (tmp_path / "judge" / "measurements.jsonl").exists()
