"""The ``hf`` backend: any transformers causal LM, the embedded Gemma 3 270M included.

:class:`~lmaudit.backends.hf.backend.HFBackend` runs in the calling process; with
``runner=lightning`` the same backend runs on PyTorch Lightning ranks
(:mod:`lmaudit.backends.hf.lightning`). Label scoring goes through the packed prefix-trie
forward (:mod:`lmaudit.backends.hf.packed`), sampling through the prefix memo
(:mod:`lmaudit.backends.hf.prefill`). Its model config is :mod:`lmaudit.backends.hf.config`.

Importing this package imports neither torch nor transformers; the backend is
:class:`lmaudit.backends.hf.backend.HFBackend`.
"""
