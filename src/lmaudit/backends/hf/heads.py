"""The vocabulary head of a causal LM over final hidden states: the model's own output
embedding (``get_output_embeddings()``), then its final logit soft-capping where the config has
one (Gemma 2), as the model's forward applies them. The packed scorer runs it once per prompt,
on the hidden states of the prompts' last tokens only (:mod:`lmaudit.backends.hf.packed.forward`);
the decoder's forward never computes the 262k-row head for the other tokens."""

from __future__ import annotations

from typing import Any

import torch


@torch.inference_mode()
def vocabulary_logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The causal LM's logits ``[n, V]`` from final hidden states ``[n, H]``."""
    out = model.get_output_embeddings()(hidden)
    cap = getattr(model.config, "final_logit_softcapping", None)
    return out if cap is None else torch.tanh(out / cap) * cap
