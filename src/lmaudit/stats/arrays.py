"""The numpy array types the statistics functions take and return."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["FloatArray", "IntArray"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
