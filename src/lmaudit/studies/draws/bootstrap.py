"""The bootstrap interval of a family's ``rho_hat`` over prompts (pure; not registered).

``rho_hat = sum (R - E0) / sum (n - 1 - E0)`` over a family's informative sequences. Sequences
of one prompt (a condition and a probe: an inspect sample, an lm-eval doc) share that prompt's
answer shares, so the prompt is the unit resampled: per prompt the sums ``t = sum (R - E0)``
and ``room = sum (n - 1 - E0)`` of its informative sequences, and the interval is the
percentile bootstrap of ``sum t / sum room`` over prompts drawn with replacement
(``scipy.stats.bootstrap``, paired, :data:`N_RESAMPLES` resamples, a seeded numpy Generator). Prompts
without an informative sequence add nothing to either sum and are not resampled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import NDArray

from lmaudit.studies.draws.results import RhoHatInterval

__all__ = ["CONFIDENCE", "METHOD", "N_RESAMPLES", "rho_hat_interval"]

N_RESAMPLES = 9999  # bootstrap resamples (B)
CONFIDENCE = 0.95
METHOD = "percentile"
_CELLS_PER_BATCH = 65_536  # resamples x prompts held at once (memory stays flat in the prompts)


def _ratio(t: NDArray[np.float64], room: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
    return np.asarray(t.sum(axis=axis) / room.sum(axis=axis))


def rho_hat_interval(
    excess: NDArray[np.float64],
    room: NDArray[np.float64],
    prompts: Sequence[Hashable],
    informative: NDArray[np.bool_],
    rng: np.random.Generator,
) -> RhoHatInterval:
    """The percentile bootstrap interval of ``sum excess / sum room`` over prompts, per
    sequence ``excess = R - E0``, ``room = n - 1 - E0`` and its prompt; the interval is None
    (with the reason) below two prompts with an informative sequence."""
    picked = [prompts[int(i)] for i in np.flatnonzero(informative)]
    keys = sorted(set(picked), key=repr)
    index = {k: j for j, k in enumerate(keys)}
    out = RhoHatInterval(
        low=None,
        high=None,
        confidence=CONFIDENCE,
        method=METHOD,
        B=N_RESAMPLES,
        unit="prompt (condition, probe)",
        n_prompts=len(keys),
    )
    if len(keys) < 2:
        return dataclasses.replace(out, reason="fewer than two prompts with an informative sequence")
    which = np.asarray([index[p] for p in picked], dtype=np.int64)
    ex, rm = excess[informative], room[informative]
    order = np.lexsort((rm, ex, which))  # summed in one order whatever the file's: the same bits
    t = np.bincount(which[order], weights=ex[order], minlength=len(keys))
    r = np.bincount(which[order], weights=rm[order], minlength=len(keys))
    from scipy.stats import bootstrap  # imported here: plans and reports do not need scipy.stats

    res = bootstrap(
        (t, r),
        _ratio,
        n_resamples=N_RESAMPLES,
        batch=max(1, _CELLS_PER_BATCH // len(keys)),
        vectorized=True,
        paired=True,
        confidence_level=CONFIDENCE,
        method=METHOD,
        rng=rng,
    )
    return dataclasses.replace(
        out, low=float(res.confidence_interval.low), high=float(res.confidence_interval.high)
    )
