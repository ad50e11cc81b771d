"""Build a backend from its config group (``model=...``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf


def plain_config(cfg: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    """A config node as a plain dict (interpolations resolved)."""
    if isinstance(cfg, DictConfig):
        out = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(out, dict)
        return {str(k): v for k, v in out.items()}
    return dict(cfg)


def build_backend(model_cfg: Mapping[str, Any] | DictConfig) -> Any:
    """The backend named by ``model.backend``; heavy imports happen only for the one asked for."""
    cfg = plain_config(model_cfg)
    cfg.pop("base_model", None)  # describes the checkpoint for framing choices; not a backend option
    kind = cfg.get("backend")
    if kind == "sim":
        from lmaudit.backends.sim import build_sim_agent

        return build_sim_agent(
            {"agent": cfg["agent"], "seed": cfg.get("seed", 0), **(cfg.get("params") or {})}
        )
    if kind == "hf":
        from lmaudit.config.execution import EXECUTION_FIELDS

        execution = {k: cfg.pop(k) for k in EXECUTION_FIELDS if k in cfg}
        if execution.get("runner", "inprocess") == "lightning":
            from lmaudit.backends.lightning_runner import LightningRunner

            return LightningRunner(cfg, execution)
        from lmaudit.backends.hf import HFBackend

        # the cache layer draws the progress bar; the backend's own would double it
        return HFBackend.from_config({**cfg, "progress": False})
    if kind == "openai":
        from lmaudit.backends.openai_compat import OpenAIBackend

        return OpenAIBackend.from_config(cfg)
    raise ValueError(f"model config: field 'backend' = {kind!r} is not one of 'hf', 'openai', 'sim'")


def build_embedder(cfg: Mapping[str, Any] | DictConfig) -> Any:
    """The embedding backend named by ``kind`` (minilm | openai | sim); heavy imports only for it.
    With ``runner=lightning`` (minilm only) it runs over ``devices`` Lightning ranks."""
    from lmaudit.config.execution import EMBEDDER_EXECUTION_FIELDS

    c = plain_config(cfg)
    execution = {k: c.pop(k) for k in EMBEDDER_EXECUTION_FIELDS if k in c}
    kind = c.get("kind")
    if execution.get("runner", "inprocess") == "lightning":
        if kind != "minilm":
            raise ValueError(
                f"embedder config: field 'runner' = 'lightning' runs only kind=minilm, not {kind!r}"
            )
        from lmaudit.backends.lightning_embed import LightningEmbedder

        return LightningEmbedder(c, execution)
    if kind == "sim":
        from lmaudit.backends.sim.embed import SimEmbedder

        return SimEmbedder(dim=int(c.get("dim", 256)), seed=int(c.get("seed", 0)))
    if kind == "minilm":
        from lmaudit.backends.embed_st import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(c.get("model"), batch_size=int(c.get("batch_size", 64)))
    if kind == "openai":
        from lmaudit.backends.embed_openai import OpenAIEmbedder

        if not c.get("base_url") or not c.get("model"):
            raise ValueError("embedder config: kind=openai needs 'base_url' and 'model'")
        fields = {k: c[k] for k in ("base_url", "model", "api_key_env") if c.get(k) is not None}
        return OpenAIEmbedder(fields)
    raise ValueError(f"embedder config: field 'kind' = {kind!r} is not one of 'minilm', 'openai', 'sim'")
