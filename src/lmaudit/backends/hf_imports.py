"""transformers for the ``hf`` backend, without scikit-learn or SciPy at import time.

Loading any transformers model class imports two modules that, when the optional package is
installed, import a function from it at module level for a feature lmaudit never uses:

* the generation package's candidate generator imports ``sklearn.metrics.roc_curve`` (assisted
  generation tuning its assistant's confidence threshold): scikit-learn and ``scipy.stats``,
  about a second;
* the loss package's object-detection losses (DETR, Deformable DETR, RT-DETR, Grounding DINO)
  import ``scipy.optimize.linear_sum_assignment`` (Hungarian matching in training): SciPy's
  optimize, linalg and sparse packages, about 0.3 s.

:func:`defer_optional_imports` loads those modules with the package reported unavailable for
the duration of their import, then binds each missing name to a function that imports the real
one on its first call and returns what it returns, so the features behave as before.
Availability is restored at once: any later check (``requires_backends``, other modules) sees
the package as installed.

If transformers is laid out differently (another version), nothing is changed.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Deferral:
    flag: str  # transformers.utils.import_utils attribute saying the package is installed
    package: str  # the module the function comes from
    name: str  # the function, imported at module level by ...
    modules: tuple[str, ...]  # ... these transformers modules
    via: str  # the module whose import loads them all


DEFERRALS = (
    Deferral(
        flag="_sklearn_available",
        package="sklearn.metrics",
        name="roc_curve",
        modules=("transformers.generation.candidate_generator",),
        via="transformers.generation.candidate_generator",
    ),
    Deferral(
        flag="_scipy_available",
        package="scipy.optimize",
        name="linear_sum_assignment",
        modules=(
            "transformers.loss.loss_for_object_detection",
            "transformers.loss.loss_deformable_detr",
            "transformers.loss.loss_rt_detr",
            "transformers.loss.loss_grounding_dino",
        ),
        via="transformers.loss.loss_utils",
    ),
)


def _on_first_call(package: str, name: str) -> Any:
    def deferred(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(package), name)(*args, **kwargs)

    deferred.__name__ = deferred.__qualname__ = name
    deferred.__doc__ = f"``{package}.{name}``, imported on first use."
    return deferred


def _defer(d: Deferral, import_utils: Any) -> bool:
    if d.via in sys.modules or any(m in sys.modules for m in d.modules):
        return False
    if getattr(import_utils, d.flag, None) is not True:  # not installed, or an unknown layout
        return False
    setattr(import_utils, d.flag, False)
    try:
        importlib.import_module(d.via)
    finally:
        setattr(import_utils, d.flag, True)
    deferred = False
    for module in d.modules:
        loaded = sys.modules.get(module)
        if loaded is not None and not hasattr(loaded, d.name):
            setattr(loaded, d.name, _on_first_call(d.package, d.name))
            deferred = True
    return deferred


def defer_optional_imports() -> dict[str, bool]:
    """Load transformers' modules named in :data:`DEFERRALS` without importing their optional
    packages; for each package, True when its import was deferred here (False: already loaded,
    not installed, or an unknown layout)."""
    try:
        from transformers.utils import import_utils
    except ImportError:
        return {d.package: False for d in DEFERRALS}
    return {d.package: _defer(d, import_utils) for d in DEFERRALS}
