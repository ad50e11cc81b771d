"""Tiny random transformers checkpoints (Gemma 3 and Llama), QQ-shaped requests and the naive
reference for the ``hf`` backend tests (no download: models and tokenizers are built and saved
here)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lmaudit.backends.base import LabelRequest, LabelResult

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


def tiny_checkpoint(path: Path, family: str, **model: Any) -> Path:
    """A tokenizer and a random ``family`` model saved in ``path`` (``model``: :func:`write_model`'s options)."""
    tok = write_tokenizer(path)
    write_model(path, family, len(tok), **model)
    return path


def make_backend(path: Path, **kw: Any) -> Any:
    """An :class:`HFBackend` of the checkpoint in ``path``, without a progress bar."""
    from lmaudit.backends.hf.backend import HFBackend

    kw.setdefault("progress", False)
    return HFBackend(str(path), **kw)


def reference_model(path: Path) -> Any:
    """The checkpoint in ``path`` as transformers loads it (its default attention, nothing of
    lmaudit's installed): the independent reference of every scoring check."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()


def naive_probs(reference: Any, ids: Sequence[int]) -> Any:
    """The next-token distribution after ``ids``: one forward of the whole prompt alone (no
    padding, no cache reuse, no ``logits_to_keep``), softmaxed in float64."""
    import torch

    with torch.inference_mode():
        logits = reference(input_ids=torch.tensor([list(ids)])).logits[0, -1]
    return torch.softmax(logits.double(), dim=-1)


def worst_vs_naive(
    backend: Any, reference: Any, requests: Sequence[LabelRequest], results: Sequence[LabelResult]
) -> float:
    """The largest absolute difference of a label or top-k probability from :func:`naive_probs`."""
    import torch

    worst = 0.0
    for req, res in zip(requests, results, strict=True):
        ref = naive_probs(reference, backend.encode(req.messages))
        for label, tid in res.label_token_ids.items():
            worst = max(worst, abs(res.probs[label] - float(ref[tid])))
        ref_top = torch.topk(ref, len(res.top_k))
        for (_, p), v in zip(res.top_k, ref_top.values, strict=True):
            worst = max(worst, abs(p - float(v)))
    return worst


def max_prob_diff(a: Sequence[LabelResult], b: Sequence[LabelResult]) -> float:
    """The largest absolute difference between two scorings of the same requests: label
    probabilities, the remaining mass and the top-k probabilities (whose tokens must agree)."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        assert x.label_token_ids == y.label_token_ids and set(x.probs) == set(y.probs)
        worst = max([worst, abs(x.other - y.other), *(abs(x.probs[k] - y.probs[k]) for k in x.probs)])
        assert len(x.top_k) == len(y.top_k)
        worst = max([worst, *(abs(p - q) for (_, p), (_, q) in zip(x.top_k, y.top_k, strict=True))])
    return worst


def chat(turns: int, seed: int) -> tuple[dict[str, str], ...]:
    """A system turn and ``turns`` user/assistant exchanges of 20-word messages, ending on a user turn."""
    rng = random.Random(seed)
    words = WORDS[4:]
    msgs = [{"role": "system", "content": " ".join(rng.choice(words) for _ in range(20))}]
    for t in range(turns):
        msgs.append({"role": "user", "content": " ".join(rng.choice(words) for _ in range(20))})
        if t < turns - 1:
            msgs.append({"role": "assistant", "content": rng.choice(["A", "B"])})
    return tuple(msgs)
