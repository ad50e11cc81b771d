"""Processor-independent arithmetic: exact unit dot products (against math.fsum, and the same
bits under other BLAS kernels), exactly rounded powers (against decimal arithmetic, and RBO
the same bits under NumPy's other SIMD kernels), and the first maximum within a tolerance."""

from __future__ import annotations

import math
import platform
from decimal import Decimal, getcontext

import numpy as np
import pytest

from lmaudit.stats.exact import SCORE_TOL, first_max, powers, unit_dots
from simd_kernels import narrower_numpy, run_python


@pytest.mark.parametrize("dim", [2, 16, 384, 3072])
def test_unit_dots_equal_the_exactly_summed_dot_products(dim):
    """Against each dot product summed exactly (math.fsum of the float32 values' products, exact
    in float64): within 1e-11 (what the split keeps: 2**-42 per coordinate, 2**-38 at 3072)."""
    rng = np.random.default_rng(dim)
    x = rng.standard_normal((12, dim))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    y = rng.standard_normal((5, dim))
    y = (y / np.linalg.norm(y, axis=1, keepdims=True)).astype(np.float32)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    ref = np.array([[math.fsum(u * v) for v in x64] for u in x64])
    assert float(np.abs(unit_dots(x) - ref).max()) < 1e-11
    ref_xy = np.array([[math.fsum(u * v) for v in y64] for u in x64])
    assert float(np.abs(unit_dots(x, y) - ref_xy).max()) < 1e-11
    assert np.array_equal(unit_dots(x), unit_dots(x).T)
    with pytest.raises(ValueError, match="dimension"):
        unit_dots(x, y[:, :1])


_DOTS = """
import hashlib
import numpy as np
from lmaudit.stats.exact import unit_dots
rng = np.random.default_rng(0)
x = rng.standard_normal((300, 256))
x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
x64 = x.astype(np.float64)
print(hashlib.sha256(unit_dots(x).tobytes()).hexdigest(), hashlib.sha256((x64 @ x64.T).tobytes()).hexdigest())
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="OpenBLAS x86 kernel names")
def test_unit_dots_are_the_same_bits_whatever_blas_kernel_computes_them():
    """The same in processes running OpenBLAS's Haswell (AVX2, FMA) and Katmai (SSE) kernels
    on one thread or two, where a plain float64 product differs between the kernels."""
    runs = [
        run_python(_DOTS, {"OPENBLAS_CORETYPE": k, "OPENBLAS_NUM_THREADS": t}).split()
        for k, t in (("Haswell", "2"), ("Katmai", "1"))
    ]
    (exact_a, plain_a), (exact_b, plain_b) = runs
    assert exact_a == exact_b
    if plain_a == plain_b:  # then the check above shows nothing about kernels
        pytest.skip("the two kernels give a plain product the same bits on this machine")


def test_powers_are_the_exact_powers_rounded_once():
    getcontext().prec = 400
    for p in (0.9, 0.5, 0.98):
        exact = [Decimal(p) ** k for k in range(200)]
        assert powers(p, 200).tolist() == [float(e) for e in exact]
    assert powers(0.9, 0).size == 0


_RBO = """
import hashlib
import numpy as np
from lmaudit.stats.rbo import rbo_all_pairs
rng = np.random.default_rng(3)
ids = np.array([rng.permutation(60)[:40] for _ in range(8)])
d = np.arange(1, 60, dtype=np.float64)
print(hashlib.sha256(rbo_all_pairs(ids, 0.9).tobytes()).hexdigest(), hashlib.sha256((0.9 ** d).tobytes()).hexdigest())
"""


def test_rbo_is_the_same_bits_under_numpys_other_simd_kernels():
    """NumPy's ``power`` has other kernels on AVX-512 than on AVX2 processors (and AVX2 than
    baseline); RBO's weights are exactly rounded powers, so its values do not follow them."""
    env = narrower_numpy()
    if env is None:
        pytest.skip("NumPy found no SIMD level beyond its baseline here")
    (rbo_a, plain_a), (rbo_b, plain_b) = (run_python(_RBO, e).split() for e in (None, env))
    assert rbo_a == rbo_b
    if plain_a == plain_b:
        pytest.skip("NumPy's power gives the same bits under both kernels on this machine")


def test_first_max_takes_the_first_score_within_the_tolerance():
    # 0.1 + 0.2 is 0.30000000000000004: equal to 0.3 but for rounding, a tie, to the first
    scores = np.array([[0.3, 0.1 + 0.2, 0.0], [0.0, 0.5, 0.5 + 2 * SCORE_TOL], [-np.inf, -np.inf, -np.inf]])
    assert int(np.argmax(scores[0])) == 1  # what a plain argmax decides
    assert first_max(scores, axis=1).tolist() == [0, 2, 0]
    assert first_max(np.array([np.nan, 0.2, 0.2])).tolist() == 1
