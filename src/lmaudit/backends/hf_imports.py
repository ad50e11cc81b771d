"""transformers for the ``hf`` backend, without scikit-learn at import time.

When transformers' generation package loads (it does for every model class), its candidate
generator imports ``sklearn.metrics.roc_curve`` if scikit-learn is installed. That one import
pulls in scikit-learn and ``scipy.stats``: about a second at every start of a run, for a
function used by a single feature (assisted generation tuning its assistant's confidence
threshold), which lmaudit never uses. :func:`defer_sklearn` loads the candidate generator with
that import deferred: ``roc_curve`` is bound to a function that imports scikit-learn's on its
first call and returns what it returns, so the feature behaves as before.

If transformers is laid out differently (another version), nothing is changed.
"""

from __future__ import annotations

import sys
from typing import Any

_GENERATOR = "transformers.generation.candidate_generator"


def _roc_curve(*args: Any, **kwargs: Any) -> Any:
    """``sklearn.metrics.roc_curve``, imported on first use."""
    from sklearn.metrics import roc_curve

    return roc_curve(*args, **kwargs)


def defer_sklearn() -> bool:
    """Load transformers' candidate generator without importing scikit-learn; True when the
    import was deferred here (False: already loaded, no scikit-learn, or an unknown layout)."""
    if _GENERATOR in sys.modules:
        return False
    try:
        from transformers.utils import import_utils
    except ImportError:
        return False
    if getattr(import_utils, "_sklearn_available", None) is not True:
        return False
    import_utils._sklearn_available = False
    try:
        import transformers.generation.candidate_generator as generator
    finally:
        import_utils._sklearn_available = True
    if hasattr(generator, "roc_curve"):  # imported anyway: nothing deferred
        return False
    generator.roc_curve = _roc_curve
    return True
