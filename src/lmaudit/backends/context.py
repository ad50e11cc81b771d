"""Prompts past a model's context are refused before any model call.

A prompt longer than the model's context is not measured as if it fitted: a model fed more
positions than it was trained on answers nonsense (and slowly), which an analysis would take for
the model's answers. A backend that knows its context declares two hooks:

* ``context_length() -> int | None``: the most tokens the model holds, the prompt and what it
  generates (hf: the config's ``max_position_embeddings``, else the tokenizer's
  ``model_max_length`` when set); None when unknown, and then nothing is checked;
* ``prompt_lengths(prompts) -> list[int]``: each chat prompt's token count as the model sees it
  (rendered through the chat template).

:func:`check_context` asks both for every request of a call before the cache or the model is
asked anything: a request needs its prompt's tokens plus what it generates (``max_tokens`` for
a draw, the one next token for a label readout) to fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lmaudit.backends.base import LabelRequest, SampleRequest
from lmaudit.errors import PromptTooLong
from lmaudit.provenance.digest import canonical_json

#: The request meta that names what a prompt asks (the first found), then what places it.
_NAMES = ("probe", "item", "packet")
_PLACES = ("condition", "mapping", "order", "position", "replicate")


def request_name(meta: dict[str, Any]) -> str:
    """What a request asks, in words, from its meta: ``probe 'p1' (condition 'A', replicate 0)``."""
    name = next((f"{k} {meta[k]!r}" for k in _NAMES if meta.get(k) is not None), "a request")
    places = [f"{k} {meta[k]!r}" for k in _PLACES if meta.get(k) is not None]
    return f"{name} ({', '.join(places)})" if places else name


def _generated(request: LabelRequest | SampleRequest) -> int:
    return request.max_tokens if isinstance(request, SampleRequest) else 1


def check_context(backend: Any, requests: Sequence[LabelRequest | SampleRequest]) -> None:
    """Raise :class:`PromptTooLong` naming the first request whose prompt and generated tokens
    exceed ``backend``'s context (and how many do); nothing when the context is unknown."""
    limit_of = getattr(backend, "context_length", None)
    count = getattr(backend, "prompt_lengths", None)
    if not requests or not callable(limit_of) or not callable(count):
        return
    limit = limit_of()
    if limit is None:
        return
    keys = [canonical_json(list(r.messages)) for r in requests]
    distinct: dict[str, int] = {}
    prompts: list[list[dict[str, str]]] = []
    for key, r in zip(keys, requests, strict=True):  # replicates repeat prompts: each counted once
        if key not in distinct:
            distinct[key] = len(prompts)
            prompts.append(list(r.messages))
    lengths = count(prompts)
    over = [
        (r, n)
        for key, r in zip(keys, requests, strict=True)
        if (n := int(lengths[distinct[key]])) + _generated(r) > limit
    ]
    if not over:
        return
    first, n = over[0]
    model = str((getattr(backend, "identity", None) or {}).get("model", "the model")).split("@")[0]
    asked = f"{n} tokens + {_generated(first)} to generate"
    more = f"; {len(over)} of {len(requests)} requests do not fit" if len(over) > 1 else ""
    raise PromptTooLong(
        f"{request_name(first.meta)}: the prompt is {asked}, past the context of {model} "
        f"({limit} tokens){more}; refused before the model was asked. Shorten the prompt or use a model with a longer context"
    )
