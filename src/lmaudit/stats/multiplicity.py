"""Multiple-testing corrections over a family of p-values (generic; no study imports).

:func:`holm` is Holm's step-down procedure: sort the ``m`` p-values, multiply the ``i``-th
smallest (0-based) by ``m - i``, take the running maximum and cap at 1. A hypothesis is
rejected when its adjusted p-value is at most ``alpha``; this controls the family-wise error
rate at ``alpha`` under any dependence between the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from lmaudit.stats.intervals import check_alpha

__all__ = ["HolmResult", "holm"]


@dataclass(frozen=True)
class HolmResult:
    """Holm-adjusted p-values and rejections, in the order the p-values were given."""

    pvalues: NDArray[np.float64]
    adjusted: NDArray[np.float64]
    reject: NDArray[np.bool_]
    alpha: float

    def to_json(self, names: Sequence[str] | None = None) -> list[dict[str, object]]:
        keys = list(names) if names is not None else [str(i) for i in range(len(self.pvalues))]
        return [
            {"name": k, "p": float(p), "holm_p": float(a), "reject": bool(r)}
            for k, p, a, r in zip(keys, self.pvalues, self.adjusted, self.reject, strict=True)
        ]


def holm(pvalues: ArrayLike, alpha: float = 0.05) -> HolmResult:
    """Holm's step-down adjustment of ``pvalues`` at family-wise level ``alpha``.

    Raises ValueError on p-values outside [0, 1] (or not finite) and on ``alpha`` outside (0, 1).
    """
    p = np.asarray(pvalues, dtype=np.float64).reshape(-1)
    check_alpha(alpha)
    if p.size and (not np.all(np.isfinite(p)) or p.min() < 0.0 or p.max() > 1.0):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()!r}")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (m - np.arange(m))
    adjusted_sorted = np.minimum(np.maximum.accumulate(scaled), 1.0) if m else scaled
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = adjusted_sorted
    return HolmResult(pvalues=p, adjusted=adjusted, reject=adjusted <= alpha, alpha=float(alpha))
