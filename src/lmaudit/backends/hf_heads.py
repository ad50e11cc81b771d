"""The vocabulary head of a causal LM over final hidden states, block by block of its output
embedding (262k rows, 671 MB for Gemma 3): for the prompts of a scoring unit together
(:func:`vocabulary_logits`, :mod:`lmaudit.backends.hf_batching`) and for prompts being sampled
(:func:`vocabulary_logits_each`, :mod:`lmaudit.backends.hf_prefill`), where each prompt's
logits must be its own bitwise whatever else is sampled with it."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch

#: Vocabulary rows per block of the head product (its output block stays in cache).
HEAD_BLOCK = 4096


@torch.inference_mode()
def vocabulary_logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The causal LM's logits ``[n, V]`` from final hidden states ``[n, H]``: its output
    embedding in blocks of ``HEAD_BLOCK`` vocabulary rows, one product over all ``n`` rows per
    block, then its final logit soft-capping (Gemma 2), if any, as the model's own forward
    applies it."""
    out = _head(model, hidden)
    cap = getattr(model.config, "final_logit_softcapping", None)
    return out if cap is None else torch.tanh(out / cap) * cap


def _head(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The head's products over ``hidden``'s rows (no soft-capping), one product per block."""
    emb = model.get_output_embeddings()
    weight = emb.weight
    bias = getattr(emb, "bias", None)
    out = torch.empty(hidden.shape[0], weight.shape[0], dtype=hidden.dtype, device=hidden.device)
    for a in range(0, weight.shape[0], HEAD_BLOCK):
        b = min(weight.shape[0], a + HEAD_BLOCK)
        w, bb = weight[a:b], None if bias is None else bias[a:b]
        out[:, a:b] = torch.nn.functional.linear(hidden, w, bb)
    return out


#: Fewest rows of a product that computes prompts' heads for sampling
#: (:func:`vocabulary_logits_each`); zero rows pad fewer. On some processors MKL computes a
#: product of one to three rows with another kernel, whose rows round differently from the same
#: rows in a product of four or more (an AMD EPYC with AVX2: one row against four, up to a few
#: units in the last place); from four rows on, each row's result was its own, whatever the other
#: rows, their number or the thread count. A prompt's head is therefore defined as its row in a
#: product of at least this many rows, and the heads of several prompts can share one product
#: (checked on the machine, :func:`_stacked_is_exact`) instead of one pass over the 671 MB head
#: per prompt.
HEAD_MIN_ROWS = 4

#: Row counts for which a stacked head product was checked to give each row the bits of its
#: own padded product, by (rows, weight shape, dtype, threads): True (exact, used) or False
_STACKED_EXACT: dict[tuple[Any, ...], bool] = {}


def _padded(hidden: torch.Tensor) -> torch.Tensor:
    """``hidden`` with zero rows appended up to :data:`HEAD_MIN_ROWS` rows."""
    missing = HEAD_MIN_ROWS - hidden.shape[0]
    return hidden if missing <= 0 else torch.cat([hidden, hidden.new_zeros(missing, hidden.shape[1])])


def _own_head(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> list[torch.Tensor]:
    """Each row's own product with ``weight`` (a block of the head): its row in a product over
    it and zero rows (:data:`HEAD_MIN_ROWS`)."""
    return [
        torch.nn.functional.linear(_padded(hidden[i : i + 1]), weight, bias)[:1]
        for i in range(hidden.shape[0])
    ]


def _stacked_is_exact(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether one product over the rows of ``hidden`` (at least :data:`HEAD_MIN_ROWS`) gives
    each row bitwise its own padded product (:func:`_own_head`), on the first block of the head
    and a ragged last one (checked once per row count and thread count; the other blocks have
    the first one's shape). MKL's products of four rows or more are row-independent in
    lmaudit's strict reproducibility mode; this does not rest on that."""
    key = (hidden.shape[0], tuple(weight.shape), weight.dtype, torch.get_num_threads(), HEAD_BLOCK)
    if key not in _STACKED_EXACT:
        vocab = weight.shape[0]
        starts = sorted({0, (vocab - 1) // HEAD_BLOCK * HEAD_BLOCK})  # the first block, a ragged last
        exact = True
        for a in starts:
            w = weight[a : a + HEAD_BLOCK]
            bb = None if bias is None else bias[a : a + HEAD_BLOCK]
            together = torch.nn.functional.linear(hidden, w, bb)
            exact = exact and all(
                torch.equal(together[i : i + 1], own) for i, own in enumerate(_own_head(hidden, w, bb))
            )
        _STACKED_EXACT[key] = exact
    return _STACKED_EXACT[key]


def _heads_for_sampling(model: Any, stacked: torch.Tensor) -> torch.Tensor:
    """The head products (no soft-capping) of ``stacked``'s rows, each row bitwise its own
    padded product: block by block, one product over all the rows (zero-padded to
    :data:`HEAD_MIN_ROWS`) where that is exact here, else one padded product per row."""
    emb = model.get_output_embeddings()
    weight, bias = emb.weight, getattr(emb, "bias", None)
    n = stacked.shape[0]
    rows = _padded(stacked)
    together = _stacked_is_exact(rows, weight, bias)
    out = torch.empty(n, weight.shape[0], dtype=stacked.dtype, device=stacked.device)
    for a in range(0, weight.shape[0], HEAD_BLOCK):
        b = min(weight.shape[0], a + HEAD_BLOCK)
        w, bb = weight[a:b], None if bias is None else bias[a:b]
        if together:
            out[:, a:b] = torch.nn.functional.linear(rows, w, bb)[:n]
        else:
            out[:, a:b] = torch.cat(_own_head(stacked, w, bb))
    return out


@torch.inference_mode()
def vocabulary_logits_each(model: Any, hiddens: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The head of each of ``hiddens`` (``[n_i, H]`` each) for sampling, each row's logits
    bitwise those of that row alone: its row in a product over it and zero rows
    (:data:`HEAD_MIN_ROWS`), block by block, then the soft-capping (so a draw does not depend on
    the prompts sampled with it). Each ``HEAD_BLOCK`` of the output embedding is read from memory
    once for all of them (the whole head, 671 MB for Gemma 3's vocabulary, does not stay in cache
    between prompts) where one product over their rows is checked to be exact
    (:func:`_stacked_is_exact`), else one padded product per row, block by block. The
    soft-capping, an element-wise function, runs on each row on its own, as it would alone."""
    if not hiddens:
        return []
    stacked = torch.cat(list(hiddens)) if len(hiddens) > 1 else hiddens[0]
    out = _heads_for_sampling(model, stacked)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap is not None:
        out = torch.cat([torch.tanh(out[i : i + 1] / cap) * cap for i in range(out.shape[0])])
    if len(hiddens) == 1:
        return [out]
    rows = list(itertools.accumulate([h.shape[0] for h in hiddens], initial=0))
    return [out[r0:r1].clone() for r0, r1 in itertools.pairwise(rows)]
