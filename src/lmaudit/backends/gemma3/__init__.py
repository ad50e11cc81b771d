"""Gemma 3's text decoder in plain torch, for the ``hf`` backend without transformers.

transformers is the reference implementation of Gemma 3 (``Gemma3ForCausalLM``), and for any
other architecture the ``hf`` backend uses it. Importing it costs a run more than importing
torch itself (its utilities pull in ``torch._dynamo``, ``torch.distributed.tensor`` and
accelerate), which is most of what a default audit spends before its first forward. This module
computes the same model with the same torch operations in the same order, so its outputs are
those of transformers' forward bit for bit (checked in the tests on random models and on the
embedded checkpoint):

* the scaled embedding, the sandwich norms (``(1 + w) * x / rms(x)`` in float32), q/k norms,
  local and global rotary embeddings (default or linear RoPE), the tanh-GELU MLP;
* attention as transformers' SDPA path dispatches it on the CPU: with no mask, one
  ``scaled_dot_product_attention`` call with ``is_causal`` and grouped-query heads; with a mask,
  the key/value heads repeated and a boolean (or additive) mask; a packed prefix-trie mask
  (:class:`~lmaudit.backends.hf_attention.PackedMask`) by blocks of trie nodes;
* the masks transformers builds for a forward without one (causal; sliding-window layers also
  drop keys ``sliding_window`` or more positions back), left out where SDPA's ``is_causal`` is
  equivalent, as transformers does;
* :class:`KVCache`, whose layers behave as transformers' ``DynamicCache`` layers (a cache made
  from the config keeps only the last ``sliding_window - 1`` positions of sliding layers).

The module classes take transformers' names and parameter paths, so a ``save_pretrained``
checkpoint loads as it is (``model.safetensors``, or sharded with its index), and the
surrounding code (packed scoring, the last-layer shortcut, prefill, decoding, the Lightning
runner's FSDP wrapping by ``*DecoderLayer``) works on either implementation. What is not
supported here (attention logit soft-capping, bidirectional attention, RoPE types other than
default and linear, 2-D padding masks) is refused by :func:`supported`, and such checkpoints
run on transformers.
"""

from __future__ import annotations

from lmaudit.backends.gemma3.cache import KVCache, KVLayer
from lmaudit.backends.gemma3.config import (
    IMPLEMENTATION_VERSION,
    MODEL_TYPE,
    Gemma3TextConfig,
    supported,
    unsupported,
    why_not_loadable,
)
from lmaudit.backends.gemma3.model import Gemma3ForCausalLM, Gemma3TextModel, load_model
from lmaudit.backends.gemma3.ops import (
    apply_rotary_pos_emb,
    causal_mask,
    default_masks,
    repeat_kv,
    sdpa_attention,
)

__all__ = [
    "IMPLEMENTATION_VERSION",
    "MODEL_TYPE",
    "Gemma3ForCausalLM",
    "Gemma3TextConfig",
    "Gemma3TextModel",
    "KVCache",
    "KVLayer",
    "apply_rotary_pos_emb",
    "causal_mask",
    "default_masks",
    "load_model",
    "repeat_kv",
    "sdpa_attention",
    "supported",
    "unsupported",
    "why_not_loadable",
]
