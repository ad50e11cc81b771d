"""Embeddings from any OpenAI-compatible server: ``POST {base_url}/embeddings``.

Config keys (a Mapping; defaults in brackets): ``base_url`` (required, e.g.
``http://127.0.0.1:8000/v1``), ``model`` (required, the served name, e.g.
``text-embedding-3-large``), ``dimensions`` [None: the model's own; sent when set],
``api_key_env`` [``OPENAI_API_KEY``]: the *name* of the environment variable holding the key,
read at request time, sent only in the ``Authorization`` header, never stored, logged or
echoed in errors; ``revision`` [None]: the user's name for the served weights;
``batch_size`` [256] texts per request; ``timeout_s`` [60], ``max_retries`` [5],
``backoff_base_s`` [0.5], ``backoff_cap_s`` [30], ``request_deadline_s`` [600]: requests go
through the ``openai`` backend's client (:mod:`lmaudit.backends.openai.client`), so 429, 5xx,
dropped connections and timeouts are retried with exponential backoff and full jitter
(``Retry-After`` honoured up to the cap) within the deadline, any other 4xx fails at once with
the server's message, and a server that cannot be reached fails at once;
``max_answer_bytes`` [64 MiB: 256 rows of 3072 numbers as JSON fit] bounds one answer, a larger
one is refused in one line naming the URL and the bound.

The identity is the model, its revision and the requested dimension, not the URL or key: the
same served model embeds alike wherever it is hosted. Rows come back in input order (the
response's ``index`` fields are honoured) and are L2-normalised as float32.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.backends.api import BackendAPI
from lmaudit.backends.embed.base import as_unit_rows
from lmaudit.backends.openai.client import HttpClient, server_and_model
from lmaudit.backends.registry import register_embedder
from lmaudit.errors import BackendError
from lmaudit.provenance.redact import redact_url

BACKEND_VERSION = 1
_KNOWN = {
    "base_url",
    "model",
    "dimensions",
    "api_key_env",
    "revision",
    "batch_size",
    "timeout_s",
    "max_retries",
    "backoff_base_s",
    "backoff_cap_s",
    "request_deadline_s",
    "max_answer_bytes",
}

#: The default bound on one embeddings answer: a batch of rows of numbers written as text.
MAX_EMBEDDINGS_ANSWER_BYTES = 64 << 20


@register_embedder("openai")
class OpenAIEmbedder(BackendAPI):
    identity_name = "openai-embeddings"
    identity_version = BACKEND_VERSION

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ):
        cfg = dict(config)
        unknown = sorted(k for k in cfg if k not in _KNOWN)
        if unknown:
            raise BackendError(
                f"openai embeddings config: unknown field {unknown[0]!r} (known: {sorted(_KNOWN)})"
            )
        self.base_url, self.model = server_and_model(cfg, "openai embeddings")
        dims = cfg.get("dimensions")
        self.dimensions: int | None = None if dims is None else int(dims)
        rev = cfg.get("revision")
        self.revision: str | None = None if rev is None else str(rev)
        self.batch_size = int(cfg.get("batch_size", 256))
        self._http = HttpClient.from_config(
            self.base_url, cfg, max_answer_bytes=MAX_EMBEDDINGS_ANSWER_BYTES, sleep=sleep, rng=rng
        )
        self.api_key_env = self._http.api_key_env
        if self.batch_size < 1 or self._http.max_retries < 0 or self._http.timeout_s <= 0:
            raise BackendError(
                "openai embeddings config: need batch_size >= 1, max_retries >= 0, timeout_s > 0"
            )

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> OpenAIEmbedder:
        """From an embedder config (``kind: openai``): its ``base_url``, ``model`` and
        ``api_key_env``; other kinds' fields are not read."""
        return cls({k: cfg[k] for k in ("base_url", "model", "api_key_env") if cfg.get(k) is not None})

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={redact_url(self.base_url)!r}, model={self.model!r})"

    def identity_fields(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "revision": self.revision,
            "dimensions": self.dimensions,
        }

    @property
    def dim(self) -> int | None:
        return self.dimensions

    def _batch(self, texts: list[str]) -> NDArray[np.float64]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        reply = self._http.post(f"{self.base_url}/embeddings", body)
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list) or len(data) != len(texts):
            got = len(data) if isinstance(data, list) else "no"
            raise BackendError(f"embeddings reply: {got} rows for {len(texts)} texts")
        rows: list[Any] = [None] * len(texts)
        for k, item in enumerate(data):
            index = item.get("index", k) if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(texts) or rows[index] is not None:
                raise BackendError(f"embeddings reply: row {k} has a bad or repeated index {index!r}")
            vector = item.get("embedding")
            if not isinstance(vector, list):
                raise BackendError(f"embeddings reply: row {k} has no float list 'embedding'")
            rows[index] = vector
        if len({len(r) for r in rows}) != 1:
            raise BackendError("embeddings reply: rows of different lengths")
        return np.asarray(rows, dtype=np.float64)

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dimensions or 0), dtype=np.float32)
        parts = [
            self._batch(list(texts[s : s + self.batch_size])) for s in range(0, len(texts), self.batch_size)
        ]
        return as_unit_rows(np.vstack(parts), len(texts), f"openai embeddings {self.model}")
