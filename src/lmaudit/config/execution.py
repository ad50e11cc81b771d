"""The execution fields of a model config: how a model runs, not what it is.

``runner`` (in-process or the PyTorch Lightning runner), ``devices``, ``num_nodes``, ``strategy``,
``accelerator`` and ``precision`` (and, in-process, ``device`` and ``pack_tokens``) choose where
and how the ``hf`` backend computes (``runner``,
``devices`` and ``accelerator`` also the choir study's MiniLM embedder). They never enter a
backend's identity, a cache key, a plan or its digest, so answers computed on a cluster
serve a laptop and a registration binds the design, not the hardware (docs/scale.md).
"""

from __future__ import annotations

from typing import Any

#: Lightning precisions the ``hf`` runner takes; a "-true" one must be the model's dtype.
PRECISIONS = ("32-true", "bf16-true", "16-true", "bf16-mixed", "16-mixed")
TRUE_PRECISION = {"float32": "32-true", "bfloat16": "bf16-true", "float16": "16-true"}
#: The fields that choose a model's runner and its ranks; the rest of the model config goes to
#: the backend (:func:`lmaudit.backends.registry.build_backend`).
RUNNER_FIELDS = ("runner", "devices", "num_nodes", "strategy", "accelerator", "precision")
#: Model config fields that say how a model runs, not what it is: they never enter a backend's
#: identity, a cache key, a plan or its digest (so answers computed on a cluster serve a laptop).
#: The runner fields, and the ``hf`` backend's in-process ``device`` and ``pack_tokens``.
EXECUTION_FIELDS = (*RUNNER_FIELDS, "device", "pack_tokens")
#: The subset an embedder config takes (``study.embedder`` of the choir study): one machine's
#: processes, each with the whole (small) model.
EMBEDDER_EXECUTION_FIELDS = ("runner", "devices", "accelerator")


def without_execution(model: Any, fields: tuple[str, ...] = EXECUTION_FIELDS) -> Any:
    """A model (or embedder) config (plain dict) without its execution fields; anything else unchanged."""
    if not isinstance(model, dict):
        return model
    return {k: v for k, v in model.items() if k not in fields}


def execution_problems(node: Any, where: str = "model") -> list[str]:
    """Relations between the execution fields of the config node at ``where`` (``model``, or an
    embedder's ``study.embedder``); each problem names its field."""
    get = node.get
    out: list[str] = []
    runner = get("runner", "inprocess")
    if runner != "lightning":
        for name in ("devices", "num_nodes"):
            if (get(name, 1) or 1) > 1:
                out.append(f"{where}.{name} = {get(name)} needs {where}.runner=lightning")
        if get("strategy", "ddp") != "ddp" or get("precision") is not None:
            out.append(f"{where}.strategy and {where}.precision apply only with {where}.runner=lightning")
    if runner == "lightning" and get("device", "cpu") != "cpu":
        out.append(
            f"{where}.device = {get('device')!r} applies only in-process; with {where}.runner=lightning "
            f"the ranks are placed by {where}.accelerator"
        )
    precision = get("precision")
    dtype = get("dtype", "float32")
    if precision is not None and precision.endswith("-true") and precision != TRUE_PRECISION.get(dtype):
        out.append(
            f"{where}.precision = {precision!r} does not match {where}.dtype = {dtype!r} "
            f"(use {TRUE_PRECISION.get(dtype)!r}, or change {where}.dtype)"
        )
    return out


def tasks_per_node(runner: str, devices: int) -> int:
    """SLURM tasks per node for a model config: one per device with the Lightning runner."""
    return int(devices) if runner == "lightning" else 1


def gpus_per_node(runner: str, accelerator: str, devices: int) -> int:
    """SLURM GPUs per node: one per device with the Lightning runner, unless it runs on CPU."""
    return int(devices) if runner == "lightning" and accelerator != "cpu" else 0


def register_resolvers() -> None:
    """``${lmaudit.tasks_per_node:...}`` and ``${lmaudit.gpus_per_node:...}`` for the SLURM launcher."""
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("lmaudit.tasks_per_node", tasks_per_node, replace=True)
    OmegaConf.register_new_resolver("lmaudit.gpus_per_node", gpus_per_node, replace=True)
