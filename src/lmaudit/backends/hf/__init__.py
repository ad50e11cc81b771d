"""The ``hf`` backend: any transformers causal LM, the embedded Gemma 3 270M included.

:class:`~lmaudit.backends.hf.backend.HFBackend` runs in the calling process; with
``runner=lightning`` the same backend runs on PyTorch Lightning ranks
(:mod:`lmaudit.backends.hf.lightning`). Label scoring goes through the packed prefix-trie
forward (:mod:`lmaudit.backends.hf.packed`), sampling through the prefix memo
(:mod:`lmaudit.backends.hf.prefill`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmaudit.backends.hf.backend import HFBackend

__all__ = ["HFBackend", "build_hf_backend"]


def build_hf_backend(config: Mapping[str, Any]) -> Any:
    """The backend a plain ``model=`` config dict asks for: in-process, or the Lightning runner
    when its execution fields say ``runner: lightning``."""
    from lmaudit.config.execution import EXECUTION_FIELDS

    cfg = dict(config)
    execution = {k: cfg.pop(k) for k in EXECUTION_FIELDS if k in cfg}
    if execution.get("runner", "inprocess") == "lightning":
        from lmaudit.backends.hf.lightning.runner import LightningRunner

        return LightningRunner(cfg, execution)
    # the cache layer draws the progress bar; the backend's own would double it
    return HFBackend.from_config({**cfg, "progress": False})
