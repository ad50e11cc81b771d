"""Label tokens and label results for the ``hf`` backend.

A label is scored by the single token it adds to the rendered prompt:
``ids(prompt + label) == ids(prompt) + [t]`` (gate G1). :func:`label_tails` finds each label's
tokens after the prompt; :func:`label_token_ids` enforces G1; :func:`label_results` turns a
chunk of next-token logits into :class:`LabelResult` objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from lmaudit.backends.base import LabelResult
from lmaudit.errors import BackendError

Encode = Callable[[Sequence[str]], list[list[int]]]


def label_tails(
    encode: Encode, text: str, ids: list[int], labels: Sequence[str]
) -> dict[str, tuple[bool, list[int]]]:
    """For each label: (prompt ids are a prefix of ids(prompt + label), ids after the common prefix)."""
    with_labels = encode([text + label for label in labels])
    out: dict[str, tuple[bool, list[int]]] = {}
    for label, full in zip(labels, with_labels, strict=True):
        common = 0
        while common < min(len(ids), len(full)) and ids[common] == full[common]:
            common += 1
        out[label] = (common == len(ids), full[common:])
    return out


def pieces(tokenizer: Any, ok: bool, tail: list[int]) -> list[str]:
    """A label's token pieces; a label that merges with the prompt gets a leading marker."""
    out = [str(p) for p in tokenizer.convert_ids_to_tokens(tail)]
    return out if ok else ["<merges-with-prompt>", *out]


def label_token_ids(
    encode: Encode, tokenizer: Any, text: str, ids: list[int], labels: Sequence[str], model_id: str
) -> dict[str, int]:
    """Each label's single token after the rendered prompt, or BackendError (gate G1)."""
    out: dict[str, int] = {}
    for label, (ok, tail) in label_tails(encode, text, ids, labels).items():
        if not ok or len(tail) != 1:
            raise BackendError(
                f"hf backend: label {label!r} is not a single token after the rendered prompt (gate G1): "
                f"it tokenizes to {pieces(tokenizer, ok, tail)} after a prompt ending {text[-40:]!r} "
                f"(model {model_id})"
            )
        out[label] = tail[0]
    if len(set(out.values())) != len(out):
        raise BackendError(f"hf backend: labels {list(out)} share token ids {out} (model {model_id})")
    return out


#: Rows of the vocabulary logits softmaxed at a time (:func:`label_results`).
SOFTMAX_ROWS = 16


def label_results(
    logits: Any, idx: Sequence[int], label_ids: Sequence[Mapping[str, int]], k: int, tokenizer: Any
) -> Iterator[tuple[int, LabelResult]]:
    """``(i, result)`` for the rows of ``logits`` ([len(idx), V]): softmax in float64, labels, top-k.

    The rows go through ``SOFTMAX_ROWS`` at a time: torch's softmax and top-k compute each row on
    its own, so the results are those over all rows at once, and a block's float64
    copies (16 MB for Gemma 3's vocabulary) are reused from one block to the next where the
    whole (200 MB for 96 rows, twice) would be fresh memory, faulted in page by page (the
    default run's 186 rows: 0.34 s against 0.68 s, four alternating in-process pairs)."""
    import torch

    for r0 in range(0, len(idx), SOFTMAX_ROWS):
        rows = idx[r0 : r0 + SOFTMAX_ROWS]
        probs = torch.softmax(logits[r0 : r0 + len(rows)].double(), dim=-1)
        tops = torch.topk(probs, min(k, probs.shape[-1]), dim=-1) if k else None
        for row, i in enumerate(rows):
            p = {label: float(probs[row, t]) for label, t in label_ids[i].items()}
            top: list[tuple[str, float]] = []
            if tops is not None:
                top = [
                    (tokenizer.decode([int(t)]), float(v))
                    for v, t in zip(tops.values[row].tolist(), tops.indices[row].tolist(), strict=True)
                ]
            yield (
                i,
                LabelResult(
                    probs=p, other=1.0 - sum(p.values()), top_k=top, label_token_ids=dict(label_ids[i])
                ),
            )
        del probs, tops
