"""Tiny random transformers checkpoints and QQ-shaped requests for the ``hf`` backend tests
(no download: models and tokenizers are built and saved here)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmaudit.backends.base import LabelRequest

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }} {{ m['content'] }}<end_of_turn>"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model {% endif %}"
)
WORDS = [
    "A",
    "B",
    "Yes",
    "No",
    "the",
    "a",
    "is",
    "it",
    "true",
    "that",
    "you",
    "think",
    "answer",
    "with",
    "question",
    "first",
    "second",
    "legend",
    "means",
    "climate",
    "change",
    "real",
    "honest",
    "trustworthy",
    "people",
    "should",
    "government",
    "policy",
    "economy",
    "good",
    "bad",
    "system",
    "user",
    "model",
    "assistant",
    "please",
    "only",
    "one",
    "letter",
    "agree",
    "disagree",
    "statement",
    "following",
]


def one_thread() -> Iterator[None]:
    """Torch on one thread for a test module (as a module-scoped autouse fixture): tiny ops are
    dominated by thread hand-off; on a busy 2-core machine 2 threads cost ~100x."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def corpus() -> list[str]:
    import random

    rng = random.Random(0)
    return [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(300)] + ["A B Yes No"] * 50


def write_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=160, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    fast.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(path))
    return fast


def write_model(
    path: Path,
    family: str,
    vocab: int,
    sliding_window: int = 256,
    layer_types: tuple[str, ...] = ("sliding_attention", "full_attention"),
    **extra: Any,
) -> None:
    """A random ``family`` ("gemma3" or "llama") checkpoint; ``extra``: more Gemma 3 config fields."""
    import torch
    import transformers

    torch.manual_seed(0)
    common: dict[str, Any] = dict(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=len(layer_types) if family == "gemma3" else 2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=512,
        initializer_range=0.3,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    if family == "gemma3":
        cfg = transformers.Gemma3TextConfig(
            **{**common, **extra},  # extra may also override the common sizes
            sliding_window=sliding_window,
            layer_types=list(layer_types),
            query_pre_attn_scalar=8,
        )
        model = transformers.Gemma3ForCausalLM(cfg)
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    model.save_pretrained(str(path))


def qq_requests(n_items: int = 4, system: bool = True) -> list[LabelRequest]:
    """Per item and order: a position-1 prompt and two position-2 prompts extending it."""
    sys_msg = {
        "role": "system",
        "content": "legend A means agree and B means disagree answer with one letter",
    }
    out = []
    for item in range(n_items):
        for order in range(2):
            q1 = f"question first is it true that {WORDS[4 + item]} {WORDS[10 + order]} people"
            q2 = f"question second {WORDS[20 + item]} is good"
            base = [sys_msg] if system else []
            u1 = [*base, {"role": "user", "content": q1}]
            out.append(LabelRequest(tuple(u1), ("A", "B")))
            for ans in ("A", "B"):
                msgs = (*u1, {"role": "assistant", "content": ans}, {"role": "user", "content": q2})
                out.append(LabelRequest(msgs, ("A", "B")))
    return out


def tiny_spm_meta(tab: bool = True) -> dict[str, Any]:
    """GGUF tokenizer metadata of a tiny SentencePiece BPE vocabulary shaped like Gemma's (with a
    tab piece, as Gemma 3 has, unless ``tab`` is false)."""
    import numpy as np

    pieces: list[tuple[str, float, int]] = [
        ("<pad>", -1000, 3),
        ("<eos>", -1000, 3),
        ("<bos>", -1000, 3),
        ("<unk>", -1000, 3),
        ("<start_of_turn>", -1000, 3),
        ("<end_of_turn>", -1000, 3),
        ("\n", -1000, 4),
        ("  ", -1000, 4),
    ]
    pieces += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    merged = [
        "▁t",
        "he",
        "▁the",
        "in",
        "▁a",
        "er",
        "on",
        "▁th",
        "ing",
        "▁in",
        "re",
        "an",
        "▁user",
        "us",
        "▁is",
    ]
    pieces += [(m, -float(k), 1) for k, m in enumerate(merged)]
    chars = sorted(set("abcdefghijklmnopqrstuvwxyzAB?.") | {"▁"})
    pieces += [(c, -100.0 - k, 1) for k, c in enumerate(chars)]
    if tab:
        pieces.append(("\t", -200.0, 1))
    pieces.append(("\n\n", -1000, 4))  # an added token another one ("\n") is a prefix of
    return {
        "tokenizer.ggml.tokens": [p for p, _, _ in pieces],
        "tokenizer.ggml.scores": np.array([s for _, s, _ in pieces], dtype=np.float32),
        "tokenizer.ggml.token_type": np.array([t for _, _, t in pieces], dtype=np.int32),
        "tokenizer.ggml.bos_token_id": 2,
        "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.unknown_token_id": 3,
        "tokenizer.ggml.padding_token_id": 0,
        "tokenizer.ggml.add_space_prefix": 0,
    }


def fuzz_texts(pieces: list[str], n: int, seed: int) -> list[str]:
    """Random texts of the tokenizer's pieces (with "▁" as a space or literally), added tokens and
    their fragments, whitespace runs, characters outside the vocabulary (byte fallback) and
    control characters."""
    rng = random.Random(seed)
    alphabet = pieces + [p.replace("▁", " ") for p in pieces]
    alphabet += ["<start_of", "_turn>", "<", ">", "<0x41>", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\x00"]
    alphabet += ["é", "ß", "日本", "🤖", "\u200b", "\u00a0", "ﬁ", "A\u030a"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25))) for _ in range(n)]
