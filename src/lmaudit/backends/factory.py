"""Build a backend from its config group (``model=...``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf


def _plain(cfg: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    if isinstance(cfg, DictConfig):
        out = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(out, dict)
        return {str(k): v for k, v in out.items()}
    return dict(cfg)


def build_backend(model_cfg: Mapping[str, Any] | DictConfig) -> Any:
    """The backend named by ``model.backend``; heavy imports happen only for the one asked for."""
    cfg = _plain(model_cfg)
    cfg.pop("base_model", None)  # describes the checkpoint for framing choices; not a backend option
    kind = cfg.get("backend")
    if kind == "sim":
        from lmaudit.backends.sim import build_sim_agent

        return build_sim_agent(
            {"agent": cfg["agent"], "seed": cfg.get("seed", 0), **(cfg.get("params") or {})}
        )
    if kind == "hf":
        from lmaudit.backends.hf import HFBackend

        # the cache layer draws the progress bar; the backend's own would double it
        return HFBackend.from_config({**cfg, "progress": False})
    if kind == "openai":
        from lmaudit.backends.openai_compat import OpenAIBackend

        return OpenAIBackend.from_config(cfg)
    raise ValueError(f"model config: field 'backend' = {kind!r} is not one of 'hf', 'openai', 'sim'")
