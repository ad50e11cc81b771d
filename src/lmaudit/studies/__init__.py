"""Studies: one package per study, each meeting the pipeline through :class:`Study`."""

from lmaudit.errors import NotCombinable
from lmaudit.results import OMIT_NONE, Interval, JsonRecord
from lmaudit.studies.base import Measured, Measurements, Plan, RunContext, Study, StudyResult
from lmaudit.studies.envelope import StudyResults
from lmaudit.studies.registry import get_study, register_study, study_names

__all__ = [
    "OMIT_NONE",
    "Interval",
    "JsonRecord",
    "Measured",
    "Measurements",
    "NotCombinable",
    "Plan",
    "RunContext",
    "Study",
    "StudyResult",
    "StudyResults",
    "get_study",
    "register_study",
    "study_names",
]
