"""The ``openai`` backend: any OpenAI-compatible server (vLLM, llama.cpp, Ollama, hosted APIs).

:mod:`.backend` holds both contracts (:class:`~lmaudit.backends.openai.backend.OpenAIBackend`),
:mod:`.client` the HTTP rules (retries, deadlines, reachability, credentials kept out of
messages) that the OpenAI-compatible embedder (:mod:`lmaudit.backends.embed.openai`) shares,
:mod:`.wire` the response format, :mod:`.served` the record of what a server served beside
the cache, checked before cached answers are served, and :mod:`.g1` whether a server can
decide gate G1 (docs/servers.md).
"""
