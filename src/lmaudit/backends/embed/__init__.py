"""The embedding contract and its implementations.

:mod:`.base` holds the contract (:class:`~lmaudit.backends.embed.base.EmbeddingBackend`) and the
exact vector codec, :mod:`.cached` the cache in front of any embedder, :mod:`.st`
sentence-transformers (MiniLM shipped on PyPI) and :mod:`.openai` OpenAI-compatible
``/v1/embeddings`` servers. The ``sim`` embedder is :mod:`lmaudit.backends.sim.embed`; the
Lightning runner of MiniLM belongs to the ``hf`` backend.
"""
