"""Sampling for the ``hf`` backend: ``n`` reproducible draws per prompt.

Draw ``i`` of a request samples only with a ``torch.Generator`` seeded by
``derive_seed(request.seed, i)``, one uniform per token (inverse CDF over the temperature-scaled,
top-p-truncated distribution). The prompt's logits and KV cache come from
:mod:`lmaudit.backends.hf_prefill`, cut by the prompt's own messages, so they do not depend on
which other prompts were requested; completions longer than one token decode in
blocks of a fixed number of rows (``sample_block``; surplus draws are computed and dropped), so
a draw's arithmetic does not depend on ``n`` either. The default block is one row: a draw is
decoded alone, nothing is computed for nothing (a one-draw request, as the judge makes, costs
one row, where a block of 8 costs ~4x on CPU). A larger block trades that for throughput
when requests ask for many multi-token draws, and is then part of the backend identity.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from lmaudit.backends.base import derive_seed


def _generator(seed: int, draw: int) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, draw))


def _cdf(logits: torch.Tensor, temperature: float, top_p: float) -> tuple[torch.Tensor | None, torch.Tensor]:
    """``(order, cum)``: the CDF of softmax(logits / T) restricted to the top-p nucleus; ``order``
    maps CDF positions to token ids (None: vocabulary order, when there is no nucleus)."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    if top_p >= 1.0:  # no nucleus: the CDF in vocabulary order (no sort of the 262k-entry vocab)
        return None, torch.cumsum(probs, dim=0)
    sorted_p, order = torch.sort(probs, descending=True, stable=True)
    cum = torch.cumsum(sorted_p, dim=0)
    keep = int(torch.searchsorted(cum, torch.tensor([top_p], dtype=cum.dtype)).item()) + 1
    return order, cum[: max(1, min(keep, cum.numel()))]


def _invert(us: torch.Tensor, order: torch.Tensor | None, cum: torch.Tensor) -> list[int]:
    pos = torch.searchsorted(cum, us.to(cum.dtype) * cum[-1], right=True).clamp(max=cum.numel() - 1)
    return [int(t) for t in (pos if order is None else order[pos]).tolist()]


def draw_token(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator) -> int:
    """One token from softmax(logits / T) restricted to the top-p nucleus, by inverse CDF.

    Consumes exactly one uniform from ``generator`` (also when greedy), so a draw's random
    stream does not depend on the sampling settings of other draws.
    """
    return draw_tokens(logits, temperature, top_p, [generator])[0]


def draw_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, generators: Sequence[torch.Generator]
) -> list[int]:
    """One token per generator from the same next-token distribution (computed once), each draw
    exactly as :func:`draw_token` would make it with that generator."""
    us = torch.tensor(
        [float(torch.rand((), generator=g, dtype=torch.float64)) for g in generators], dtype=torch.float64
    )
    if temperature <= 0.0:
        return [int(torch.argmax(logits).item())] * len(generators)
    order, cum = _cdf(logits, temperature, top_p)
    return _invert(us, order, cum)


@torch.inference_mode()
def decode_block(
    model: Any,
    first_logits: torch.Tensor,
    cache: Any,
    prompt_len: int,
    generators: list[torch.Generator],
    *,
    temperature: float,
    top_p: float,
    max_tokens: int,
    stop_ids: set[int],
) -> list[list[int]]:
    """Decode ``len(generators)`` draws in lock-step from a prefilled cache (expanded here).

    Row ``r`` samples only with ``generators[r]``; a row stops at a stop token (not included)
    or after ``max_tokens`` tokens. The block always has the same number of rows, so each
    draw's arithmetic is the same whatever else is in the block.
    """
    device = first_logits.device
    rows = len(generators)
    cache.batch_repeat_interleave(rows)
    out_tokens: list[list[int]] = [[] for _ in range(rows)]
    done = [False] * rows
    logits = first_logits.unsqueeze(0).expand(rows, -1)
    for step in range(max_tokens):
        nxt = []
        for r in range(rows):
            tok = draw_token(logits[r], temperature, top_p, generators[r])
            if not done[r]:
                if tok in stop_ids:
                    done[r] = True
                else:
                    out_tokens[r].append(tok)
            nxt.append(tok)
        if all(done) or step == max_tokens - 1:
            break
        out = model(
            input_ids=torch.tensor(nxt, device=device).unsqueeze(1),
            position_ids=torch.full((rows, 1), prompt_len + step, device=device),
            cache_position=torch.tensor([prompt_len + step], device=device),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        logits = out.logits[:, -1, :]
    return out_tokens


def sample_completions(
    model: Any,
    prefilled: tuple[torch.Tensor, Any],
    prompt_len: int,
    *,
    n: int,
    seed: int,
    temperature: float,
    top_p: float,
    max_tokens: int,
    stop_ids: frozenset[int],
    block: int,
) -> list[list[int]]:
    """Token ids of ``n`` completions of a prompt of ``prompt_len`` tokens, given its next-token
    logits and KV cache (``prefilled``, not mutated; :mod:`lmaudit.backends.hf_prefill`); stop
    tokens excluded."""
    logits, cache = prefilled
    if max_tokens <= 1:
        toks = draw_tokens(logits, temperature, top_p, [_generator(seed, i) for i in range(n)])
        return [[] if t in stop_ids else [t] for t in toks]
    seqs: list[list[int]] = []
    for start in range(0, n, block):
        done = decode_block(
            model,
            logits,
            copy.deepcopy(cache),
            prompt_len,
            [_generator(seed, i) for i in range(start, start + block)],
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            stop_ids=set(stop_ids),
        )
        seqs.extend(done[: n - start])
    return seqs
