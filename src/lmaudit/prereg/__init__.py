"""Pre-registration: a study's design and predictions frozen before any model is asked
anything, a run refused when its plan differs from the frozen one, and every prediction
scored afterwards.

Modules, one concern each:

- :mod:`~lmaudit.prereg.conf_files`: what a registration (``conf/prereg/<name>.yaml``) may
  set, checked before Hydra reads it;
- :mod:`~lmaudit.prereg.predictions`: predictions parsed from config, checked against a
  results shape, and scored against results;
- :mod:`~lmaudit.prereg.files`: the frozen registration files (``prereg/<study>/<name>.json``);
- :mod:`~lmaudit.prereg.bind`: what the pipeline calls (:func:`freeze`, :func:`check`,
  :func:`score_results`) and the MLflow views of scored predictions.
"""

from lmaudit.errors import PreregError
from lmaudit.prereg.bind import (
    Registration,
    check,
    freeze,
    prediction_metrics,
    prediction_tags,
    score_results,
)
from lmaudit.prereg.conf_files import check_registration, check_registrations
from lmaudit.prereg.files import load_registration, verify
from lmaudit.prereg.predictions import (
    HELD,
    NOT_EVALUABLE,
    NOT_HELD,
    Check,
    Prediction,
    parse_predictions,
    resolve,
    unknown_metrics,
)
from lmaudit.prereg.predictions import score as score_predictions

__all__ = [
    "HELD",
    "NOT_EVALUABLE",
    "NOT_HELD",
    "Check",
    "Prediction",
    "PreregError",
    "Registration",
    "check",
    "check_registration",
    "check_registrations",
    "freeze",
    "load_registration",
    "parse_predictions",
    "prediction_metrics",
    "prediction_tags",
    "resolve",
    "score_predictions",
    "score_results",
    "unknown_metrics",
    "verify",
]
