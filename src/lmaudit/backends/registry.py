"""The backends and embedders lmaudit knows, by name, each imported only when it is asked for.

``model.backend`` names a backend (:data:`BACKENDS`), an embedder config's ``kind`` an embedder
(:data:`EMBEDDERS`); a runner other than the in-process one has its own table
(:data:`EMBEDDER_RUNNERS`). Each entry is a ``"module:callable"`` reference (the form of an entry
point's object reference) to a callable that takes the plain config dict and returns the
backend. Nothing behind a name is imported until :func:`build_backend` or :func:`build_embedder`
asks for it, so a ``sim`` run never imports torch, and this module imports no backend at all:
backends may import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import EntryPoint
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmaudit.config.execution import EMBEDDER_EXECUTION_FIELDS

__all__ = [
    "BACKENDS",
    "EMBEDDERS",
    "EMBEDDER_RUNNERS",
    "build_backend",
    "build_embedder",
    "plain_config",
]

#: ``model.backend`` -> the callable building it from the model config (a plain dict).
BACKENDS: dict[str, str] = {
    "hf": "lmaudit.backends.hf:build_hf_backend",
    "openai": "lmaudit.backends.openai.backend:OpenAIBackend",
    "sim": "lmaudit.backends.sim:build_sim_backend",
}
#: embedder ``kind`` -> the callable building it in this process from the embedder config.
EMBEDDERS: dict[str, str] = {
    "minilm": "lmaudit.backends.embed.st:SentenceTransformerEmbedder.from_config",
    "openai": "lmaudit.backends.embed.openai:OpenAIEmbedder.from_config",
    "sim": "lmaudit.backends.sim.embed:SimEmbedder.from_config",
}
#: embedder ``runner`` (other than ``inprocess``) -> {``kind`` -> the callable taking the embedder
#: config and its execution fields}.
EMBEDDER_RUNNERS: dict[str, dict[str, str]] = {
    "lightning": {"minilm": "lmaudit.backends.hf.lightning.embed:LightningEmbedder"},
}


def plain_config(cfg: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    """A config node as a plain dict (interpolations resolved)."""
    if isinstance(cfg, DictConfig):
        out = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(out, dict)
        return {str(k): v for k, v in out.items()}
    return dict(cfg)


def _known(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in sorted(names))


def _load(table: Mapping[str, str], name: Any, where: str) -> Callable[..., Any]:
    """The callable registered as ``name`` in ``table``, imported now; ValueError listing the
    known names otherwise."""
    if not isinstance(name, str) or name not in table:
        raise ValueError(f"{where} = {name!r} is not one of {_known(table)}")
    loaded = EntryPoint(name=name, value=table[name], group="lmaudit.backends").load()
    assert callable(loaded), f"{table[name]} is not callable"
    return loaded


def build_backend(model_cfg: Mapping[str, Any] | DictConfig) -> Any:
    """The backend named by ``model.backend``; only that backend's modules are imported."""
    cfg = plain_config(model_cfg)
    cfg.pop("base_model", None)  # describes the checkpoint for framing choices; not a backend option
    return _load(BACKENDS, cfg.get("backend"), "model config: field 'backend'")(cfg)


def build_embedder(cfg: Mapping[str, Any] | DictConfig) -> Any:
    """The embedding backend named by ``kind``; only its modules are imported. With ``runner``
    other than ``inprocess`` (``lightning``: MiniLM only) it runs as that runner's table says."""
    c = plain_config(cfg)
    execution = {k: c.pop(k) for k in EMBEDDER_EXECUTION_FIELDS if k in c}
    kind, runner = c.get("kind"), execution.get("runner", "inprocess")
    if runner == "inprocess":
        return _load(EMBEDDERS, kind, "embedder config: field 'kind'")(c)
    kinds = EMBEDDER_RUNNERS.get(runner)
    if kinds is None:
        raise ValueError(
            f"embedder config: field 'runner' = {runner!r} is not one of {_known({'inprocess', *EMBEDDER_RUNNERS})}"
        )
    if kind not in kinds:
        raise ValueError(
            f"embedder config: field 'runner' = {runner!r} runs only kind={'|'.join(sorted(kinds))}, "
            f"not {kind!r}"
        )
    return _load(kinds, kind, "embedder config: field 'kind'")(c, execution)
