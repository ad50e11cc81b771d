"""What every study's typed results carry besides the study's own numbers: the digest of the
measurements analysed (``source``), the registration scored under (``prereg``) and the scored
predictions. The pipeline adds them; a study's result class derives from
:class:`StudyResults` and declares its own fields."""

from __future__ import annotations

from typing import Annotated, Any

from lmaudit.results import OMIT_NONE, FileDigest, JsonRecord

__all__ = [
    "Check",
    "CompoundPrediction",
    "MeasurementSource",
    "PreregRecord",
    "RegistrationFile",
    "ScoredCheck",
    "ScoredData",
    "ScoredPrediction",
    "SimplePrediction",
    "StudyResults",
]


class MeasurementSource(JsonRecord):
    """The measurements the results were derived from, by digest."""

    measurements_sha256: str


class RegistrationFile(FileDigest):
    """The registration's YAML file the run was scored under, and whether the frozen
    registration seals it."""

    sealed: bool


class ScoredData(JsonRecord):
    """An open registration's data, fixed when it was scored."""

    measurements_sha256: str
    plan_inputs: dict[str, Any] | None


class PreregRecord(JsonRecord):
    """The registration a run was scored under."""

    name: str
    path: str
    file_digest: str
    frozen_utc: str
    plan_digest: str
    registration_file: RegistrationFile
    data: Annotated[str | None, OMIT_NONE] = None  # "open": registered before its data existed
    data_scored: Annotated[ScoredData | None, OMIT_NONE] = None


class Check(JsonRecord):
    """One registered check: ``metric op value``."""

    metric: str
    op: str
    value: Any


class ScoredCheck(JsonRecord):
    """A check of a compound prediction, scored."""

    metric: str
    op: str
    value: Any
    observed: Any
    outcome: str
    reason: str


class SimplePrediction(JsonRecord, kw_only=True):
    """A scored ``metric op value`` prediction."""

    id: str
    metric: str
    op: str
    value: Any
    description: str
    confidence: Annotated[str | None, OMIT_NONE] = None
    observed: Any
    outcome: str  # held | not held | not evaluable
    reason: str


class CompoundPrediction(JsonRecord, kw_only=True):
    """A scored prediction that holds when every one of its checks holds."""

    id: str
    description: str
    confidence: Annotated[str | None, OMIT_NONE] = None
    all_of: tuple[Check, ...]
    observed: Any
    outcome: str
    reason: str
    checks: tuple[ScoredCheck, ...]


ScoredPrediction = SimplePrediction | CompoundPrediction


class StudyResults(JsonRecord, kw_only=True):
    """The base of a study's results (the body of ``results.json``). ``source`` is set by the
    pipeline on every analysed run; ``prereg`` and ``predictions`` on a registered run."""

    source: Annotated[MeasurementSource | None, OMIT_NONE] = None
    prereg: Annotated[PreregRecord | None, OMIT_NONE] = None
    predictions: Annotated[tuple[ScoredPrediction, ...] | None, OMIT_NONE] = None

    # the views the pipeline records, for a study whose results implement them (a result class
    # overrides those that apply); a LayoutStudy's views are its views module's instead

    def headline(self) -> float | None:
        """The one number a Hydra sweeper optimises (None: none)."""
        return None

    def metrics(self) -> dict[str, float]:
        """The run's numbers for MLflow (a few of them, ``Study.dvc_metrics``, for ``metrics.json``)."""
        return {}

    def tags(self) -> dict[str, str]:
        """Gate outcomes and verdicts (MLflow tags)."""
        return {}

    def summary(self) -> str:
        """One line for the console."""
        return "results written"
