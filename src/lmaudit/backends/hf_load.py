"""Loading the ``hf`` backend's tokenizer and model: with transformers, or lmaudit's own Gemma 3.

``implementation``:

* ``"transformers"``: ``AutoTokenizer`` and ``AutoModelForCausalLM`` (any architecture, hub ids,
  revisions, ``attn_implementation``);
* ``"lmaudit"``: :mod:`lmaudit.backends.gemma3` and :mod:`lmaudit.backends.hf_tokenizer`, which
  compute what transformers computes for a local Gemma 3 text checkpoint, bit for bit, without
  importing transformers (a default run's largest start-up cost);
* ``"auto"`` (the default): ``"lmaudit"`` where it applies (a local directory whose model and
  tokenizer both qualify, no ``attn_implementation`` asked for), else ``"transformers"``.

Which one ran is part of the backend identity (:meth:`~lmaudit.backends.hf.HFBackend.identity`),
so answers computed one way are never served as the other's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lmaudit.backends.base import BackendError

IMPLEMENTATIONS = ("auto", "lmaudit", "transformers")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def why_not_native(model_path: str, attn_implementation: str | None) -> str | None:
    """Why lmaudit's own implementation cannot load ``model_path``, or None when it can (as far
    as the checkpoint's small files tell: see :func:`open_tokenizer`)."""
    from lmaudit.backends import gemma3, hf_tokenizer

    path = Path(model_path)
    if not path.is_dir():
        return f"{model_path!r} is not a local directory"
    if attn_implementation:
        return f"attn_implementation={attn_implementation!r} is a transformers setting"
    return gemma3.why_not_loadable(path) or hf_tokenizer.unsupported(path)


def choose(requested: str, model_path: str, attn_implementation: str | None) -> str:
    """The implementation to use: ``"lmaudit"`` or ``"transformers"`` (see the module)."""
    if requested not in IMPLEMENTATIONS:
        raise BackendError(
            f"hf backend: implementation must be one of {', '.join(IMPLEMENTATIONS)}, got {requested!r}"
        )
    if requested == "transformers":
        return requested
    why = why_not_native(model_path, attn_implementation)
    if why is None:
        return "lmaudit"
    if requested == "lmaudit":
        raise BackendError(f"hf backend: implementation=lmaudit cannot load {model_path!r}: {why}")
    return "transformers"


def open_tokenizer(
    requested: str, model_path: str, revision: str | None, embedded: bool, attn_implementation: str | None
) -> tuple[str, Any]:
    """``(implementation, tokenizer)``: :func:`choose`, then the tokenizer. With ``auto``, a
    ``tokenizer.json`` that disagrees with the tokenizer config in a way transformers reconciles
    (:class:`~lmaudit.backends.hf_tokenizer.TokenizerMismatch`) sends the checkpoint to transformers."""
    implementation = choose(requested, model_path, attn_implementation)
    if implementation == "lmaudit":
        from lmaudit.backends.hf_tokenizer import TokenizerMismatch

        try:
            return implementation, load_tokenizer(implementation, model_path, revision, embedded)
        except TokenizerMismatch as exc:
            if requested == "lmaudit":
                raise BackendError(
                    f"hf backend: implementation=lmaudit cannot load {model_path!r}: {exc}"
                ) from exc
            implementation = "transformers"
    return implementation, load_tokenizer(implementation, model_path, revision, embedded)


def load_error(model_path: str, exc: Exception) -> BackendError:
    if _offline() and not Path(model_path).exists():
        return BackendError(
            f"hf backend: model {model_path!r} is not available offline; HF_HUB_OFFLINE is set and it "
            "is not in the local Hugging Face cache. Download it where the hub is reachable, or point "
            f"`model` at a local directory. ({type(exc).__name__}: {exc})"
        )
    return BackendError(f"hf backend: could not load model {model_path!r}: {exc}")


def tokenizer_engine(model_path: str, embedded: bool) -> str:
    """``"sentencepiece"`` for the embedded model, whose ``tokenizer.json`` lmaudit converted from
    the ``tokenizer.model`` it wrote (:mod:`lmaudit.backends.sp_tokenizer`: the same ids, loaded
    in a tenth of the time), when :func:`~lmaudit.backends.sp_tokenizer.verified` passes; else
    ``"tokenizers"``."""
    if not embedded:
        return "tokenizers"
    from lmaudit.backends import sp_tokenizer
    from lmaudit.backends.hf_tokenizer import read_json

    cfg = read_json(Path(model_path) / "tokenizer_config.json")
    return "tokenizers" if sp_tokenizer.verified(model_path, cfg) else "sentencepiece"


def load_tokenizer(implementation: str, model_path: str, revision: str | None, embedded: bool) -> Any:
    if implementation == "lmaudit":
        from lmaudit.backends.hf_tokenizer import FastTokenizer, TokenizerMismatch

        try:
            return FastTokenizer(model_path, engine=tokenizer_engine(model_path, embedded))
        except TokenizerMismatch:
            raise
        except Exception as exc:  # tokenizers raises its own exception type for a bad file
            raise load_error(model_path, exc) from exc
    from lmaudit.backends.hf_imports import defer_optional_imports

    defer_optional_imports()  # before transformers loads a model class (hf_imports)
    from transformers import AutoTokenizer

    extra: dict[str, Any] = {"fix_mistral_regex": False} if embedded else {}
    try:
        return AutoTokenizer.from_pretrained(model_path, revision=revision, **extra)
    except (OSError, ValueError) as exc:
        raise load_error(model_path, exc) from exc


def load_model(
    implementation: str,
    model_path: str,
    revision: str | None,
    dtype: str,
    device: str,
    attn_implementation: str | None,
) -> Any:
    import torch

    from lmaudit.backends.vector_math import settle

    settle()  # before any forward: MKL's first vector-math call on one thread (vector_math.py)
    if implementation == "lmaudit":
        from lmaudit.backends.gemma3 import load_model as load_gemma3

        try:
            return load_gemma3(model_path, getattr(torch, dtype), device)
        except (OSError, ValueError) as exc:
            raise load_error(model_path, exc) from exc
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"revision": revision, "dtype": getattr(torch, dtype)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    try:
        model: Any = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
    except (OSError, ValueError) as exc:
        raise load_error(model_path, exc) from exc
    return model.to(device).eval()


def implementation_identity(implementation: str) -> dict[str, Any]:
    """What names the code that computes the outputs, for the backend identity."""
    if implementation == "lmaudit":
        from lmaudit.backends.gemma3 import IMPLEMENTATION_VERSION

        return {"implementation": f"lmaudit.gemma3/{IMPLEMENTATION_VERSION}"}
    import transformers

    return {"transformers": transformers.__version__}
