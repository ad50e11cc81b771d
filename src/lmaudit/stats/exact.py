"""Arithmetic whose result does not depend on the processor, for analyses of cached responses.

A BLAS product's last bits follow the kernel the library picks for the processor (its
summation order), and NumPy's ``power``, ``exp`` and ``log`` have other implementations on
AVX-512 than on AVX2 processors. Results computed from a pulled cache must be the same bytes
on every host, so the analyses use these instead where such bits reach an output:

* :func:`unit_dots`: dot products of unit vectors, exact to ``2**-42`` per coordinate;
* :func:`powers`: ``p**k`` correctly rounded (exact rational powers);
* :func:`first_max`: the first index within a tolerance of the maximum, so that scores equal
  but for rounding are a tie, and ties go to the first.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["SCORE_TOL", "first_max", "powers", "unit_dots"]

#: Scores (cosines, accuracies' inputs) closer than this count as tied: far above the
#: rounding of a float64 product over a few thousand terms (~1e-13), far below any
#: difference an analysis reads.
SCORE_TOL = 1e-9


def _split(x: NDArray[np.float64], scale: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    hi = np.rint(x * scale)
    return hi, np.rint((x * scale - hi) * scale)  # x * scale - hi is exact (|.| <= 1/2)


def unit_dots(a: ArrayLike, b: ArrayLike | None = None) -> NDArray[np.float64]:
    """``a @ b.T`` (``b`` defaults to ``a``) for rows of unit vectors, the same bits on every
    machine.

    Each coordinate (clipped to [-1, 1]) is written as ``hi + lo * 2**-s`` with integers
    ``hi``, ``lo`` of at most ``s`` bits (what a float32 coordinate holds beyond ``2**-2s`` is
    dropped; ``2s`` is 42 up to dimension 512, 38 at 3072), and the products of the integer
    matrices are computed by BLAS: every partial sum is an integer below ``2**53``, so exact in
    any order. The three products are combined element-wise."""
    a64 = np.clip(np.asarray(a, dtype=np.float64), -1.0, 1.0)
    if a64.ndim != 2:
        raise ValueError(f"unit_dots needs 2-d arrays (rows are vectors), got shape {a64.shape}")
    b64 = a64 if b is None else np.clip(np.asarray(b, dtype=np.float64), -1.0, 1.0)
    if b64.ndim != 2 or b64.shape[1] != a64.shape[1]:
        raise ValueError(f"unit_dots: rows of dimension {a64.shape[1]} against shape {b64.shape}")
    dim = max(int(a64.shape[1]), 1)
    s = (51 - (dim - 1).bit_length()) // 2  # dim * 2**(2s) <= 2**51: every partial sum exact
    scale = float(2**s)
    ah, al = _split(a64, scale)
    bh, bl = (ah, al) if b is None else _split(b64, scale)
    cross = ah @ bl.T
    cross = cross + (cross.T if b is None else al @ bh.T)
    return np.asarray((ah @ bh.T) / scale**2 + (cross + (al @ bl.T) / scale) / scale**3)


def powers(p: float, n: int) -> NDArray[np.float64]:
    """``[p**0, p**1, ..., p**(n-1)]``, each the exact rational power rounded once."""
    out = np.empty(max(int(n), 0))
    x, f = Fraction(1), Fraction(p)
    for k in range(out.size):
        out[k] = float(x)
        x *= f
    return out


def first_max(scores: ArrayLike, axis: int = -1, tol: float = SCORE_TOL) -> NDArray[np.int64]:
    """Along ``axis``, the first index whose score is within ``tol`` of the largest (NaN is
    never the largest; a slice of ``-inf`` only gives 0)."""
    arr = np.asarray(scores, dtype=np.float64)
    best = np.max(np.where(np.isnan(arr), -np.inf, arr), axis=axis, keepdims=True)
    return np.asarray(np.argmax(arr >= best - tol, axis=axis), dtype=np.int64)
