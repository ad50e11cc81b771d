"""Studies: one package per study, each meeting the pipeline through :class:`Study`."""

from lmaudit.errors import NotCombinable
from lmaudit.studies.base import Measured, Measurements, Plan, RunContext, Study, StudyResult
from lmaudit.studies.registry import get_study, register_study, study_names

__all__ = [
    "Measured",
    "Measurements",
    "NotCombinable",
    "Plan",
    "RunContext",
    "Study",
    "StudyResult",
    "get_study",
    "register_study",
    "study_names",
]
