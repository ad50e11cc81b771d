"""Sampling for the ``hf`` backend: ``n`` reproducible draws per prompt.

Draw ``i`` of a request samples only with a ``torch.Generator`` seeded by
``derive_seed(request.seed, i)``, one uniform per token (inverse CDF over the temperature-scaled,
top-p-truncated distribution). The prompt's logits and KV cache come from
:mod:`lmaudit.backends.hf.prefill`, cut by the prompt's own messages, so they do not depend on
which other prompts were requested; completions longer than one token decode in
blocks of a fixed number of rows (``sample_block``; surplus draws are computed and dropped), so
a draw's arithmetic does not depend on ``n`` either. The default block is one row: a draw is
decoded alone, nothing is computed for nothing (a one-draw request, as the judge makes, costs
one row, where a block of 8 costs ~4x on CPU). A larger block trades that for throughput
when requests ask for many multi-token draws, and is then part of the backend identity.

A caller may follow the decoding (``on_tokens``): it is told the tokens of each decoding step as
they are drawn, and at the end of a draw the budget it did not need, so over a request the
counts add up to ``n x max_tokens`` exactly.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch

from lmaudit.backends.base import SampleRequest, derive_seed

#: At most this many sample requests are prefilled together, and at most about this many bytes
#: of their KV caches and logits are held at once (a group has at least one request). The draws
#: do not depend on either.
SAMPLE_GROUP = 16
SAMPLE_GROUP_BYTES = 256 * 2**20

#: Told a number of tokens of the decoding budget (``max_tokens`` per draw) now done.
TokenHook = Callable[[int], None]


def kv_bytes_per_token(model: Any) -> int:
    """Bytes of KV cache one prompt token takes in ``model`` (every layer counted in full: an
    upper bound where sliding-window layers keep fewer)."""
    cfg = model.config
    heads = int(getattr(cfg, "num_attention_heads", 1) or 1)
    head_dim = getattr(cfg, "head_dim", None) or int(cfg.hidden_size) // heads
    kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
    size = next(model.parameters()).element_size()
    return 2 * int(cfg.num_hidden_layers) * kv_heads * int(head_dim) * size


def sample_groups(
    lengths: Sequence[int],
    token_bytes: int,
    logits_bytes: int,
    max_prompts: int = SAMPLE_GROUP,
    max_bytes: int = SAMPLE_GROUP_BYTES,
) -> list[tuple[int, int]]:
    """Consecutive ``(start, end)`` groups of prompts of the given token lengths: at most
    ``max_prompts`` each, and no more than ``max_bytes`` of KV cache and logits unless a single
    prompt takes more."""
    groups: list[tuple[int, int]] = []
    start, held = 0, 0
    for j, n in enumerate(lengths):
        cost = n * token_bytes + logits_bytes
        if j > start and (j - start >= max_prompts or held + cost > max_bytes):
            groups.append((start, j))
            start, held = j, 0
        held += cost
    if start < len(lengths):
        groups.append((start, len(lengths)))
    return groups


def prompt_groups(model: Any, lengths: Sequence[int]) -> list[tuple[int, int]]:
    """:func:`sample_groups` of prompts of these token lengths for ``model`` (its KV cache per
    token, its vocabulary's float32 logits), within ``SAMPLE_GROUP`` and ``SAMPLE_GROUP_BYTES``."""
    vocab = model.get_output_embeddings().weight.shape[0]
    return sample_groups(lengths, kv_bytes_per_token(model), 4 * vocab, SAMPLE_GROUP, SAMPLE_GROUP_BYTES)


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
    on_step: Callable[[list[bool]], None] | None = None,
) -> list[list[int]]:
    """Decode ``len(generators)`` draws in lock-step from a prefilled cache (expanded here).

    Row ``r`` samples only with ``generators[r]``; a row stops at a stop token (not included)
    or after ``max_tokens`` tokens. The block always has the same number of rows, so each
    draw's arithmetic is the same whatever else is in the block. ``on_step`` is called after
    each step with which rows drew a token of their own at it (those not stopped before it).
    """
    device = first_logits.device
    rows = len(generators)
    cache.batch_repeat_interleave(rows)
    out_tokens: list[list[int]] = [[] for _ in range(rows)]
    done = [False] * rows
    logits = first_logits.unsqueeze(0).expand(rows, -1)
    for step in range(max_tokens):
        nxt = []
        drew = [not d for d in done]
        for r in range(rows):
            tok = draw_token(logits[r], temperature, top_p, generators[r])
            if not done[r]:
                if tok in stop_ids:
                    done[r] = True
                else:
                    out_tokens[r].append(tok)
            nxt.append(tok)
        if on_step is not None:
            on_step(drew)
        if all(done) or step == max_tokens - 1:
            break
        out = model(
            input_ids=torch.tensor(nxt, device=device).unsqueeze(1),
            position_ids=torch.full((rows, 1), prompt_len + step, device=device),
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        logits = out.logits[:, -1, :]
    return out_tokens


def sample_completions(
    model: Any,
    prefilled: tuple[torch.Tensor, Any],
    prompt_len: int,
    request: SampleRequest,
    *,
    stop_ids: frozenset[int],
    block: int,
    on_tokens: TokenHook | None = None,
) -> list[list[int]]:
    """Token ids of the ``request.n`` completions the request asks for (its seed, temperature,
    top-p and max tokens), of a prompt of ``prompt_len`` tokens, given its next-token logits and
    KV cache (``prefilled``, not mutated; :mod:`lmaudit.backends.hf.prefill`); stop tokens
    excluded. ``on_tokens``: see the module docstring."""
    n, seed, max_tokens = request.n, request.seed, request.max_tokens
    logits, cache = prefilled
    if max_tokens <= 1:
        toks = draw_tokens(
            logits, request.temperature, request.top_p, [_generator(seed, i) for i in range(n)]
        )
        if on_tokens is not None:
            on_tokens(n * max_tokens)
        return [[] if t in stop_ids else [t] for t in toks]
    seqs: list[list[int]] = []
    for start in range(0, n, block):
        kept = min(block, n - start)  # the block's rows that are draws of the request
        step_hook = None if on_tokens is None else _counting_rows(on_tokens, kept)
        done = decode_block(
            model,
            logits,
            copy.deepcopy(cache),
            prompt_len,
            [_generator(seed, i) for i in range(start, start + block)],
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=max_tokens,
            stop_ids=set(stop_ids),
            on_step=step_hook,
        )
        if on_tokens is not None:  # the budget the block's draws stopped short of
            on_tokens(sum(max_tokens - _steps(len(s), max_tokens) for s in done[:kept]))
        seqs.extend(done[:kept])
    return seqs


def _counting_rows(on_tokens: TokenHook, rows: int) -> Callable[[list[bool]], None]:
    """A ``decode_block`` step hook telling ``on_tokens`` the tokens drawn by its first ``rows`` rows."""
    return lambda drew: on_tokens(sum(drew[:rows]))


def _steps(length: int, max_tokens: int) -> int:
    """Decoding steps a draw of ``length`` tokens took: one more than its length for the stop
    token that ended it, unless it ran to ``max_tokens``."""
    return min(length + 1, max_tokens)
