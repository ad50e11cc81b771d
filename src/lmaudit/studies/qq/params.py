"""The QQ analysis's pre-specified parameters, their defaults taken from the study's schema."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import field, fields
from typing import Annotated, Any

from lmaudit.results import OMIT_NONE, JsonRecord
from lmaudit.studies.qq.config import EstimandConfig, QQStudyConfig

__all__ = ["QQParams"]

_STUDY = QQStudyConfig()
_ESTIMAND = EstimandConfig()


class QQParams(JsonRecord):
    """Pre-specified analysis parameters (names follow ``conf`` ``study/qq``); the results
    record them as :meth:`recorded` gives them."""

    # defaults: the study's schema (studies/qq/config.py), the one place they are written
    epsilon: float = _STUDY.epsilon  # QQ practical-equivalence margin
    float_tol: float = _STUDY.float_tol  # floating-point tolerance of the QQ decision
    gamma_tol: float = _STUDY.gamma_tol  # Γ certification threshold (see envelope.gamma_class)
    saturation_threshold: float = _STUDY.saturation_threshold
    saturation_sensitivity: tuple[float, ...] = tuple(_STUDY.saturation_sensitivity)
    g2_max_other: float = _STUDY.gates.g2_max_other  # gate G2: other mass must stay below this everywhere
    memorization_pairs: dict[str, str] = field(default_factory=dict)  # S2 item -> matched S1 item
    memorization_threshold: float = _STUDY.memorization_threshold
    memorization_min_pairs: int = _STUDY.memorization_min_pairs
    estimand: str = "logprob"  # which records the verdicts use: "logprob" | "sampled"
    interval_alpha: float = 0.05  # per-position Clopper-Pearson level for sampled records
    # sampled estimand: family-wise level per item of the region the decisions are taken over
    # (studies/qq/sampling_error.py); the estimand config's ``alpha``
    # (None: the schema's default; left out of the results of a run that decided on no
    # sampling error, where it is not a parameter)
    sampled_alpha: Annotated[float | None, OMIT_NONE] = None
    sum_tol: float = 1e-6  # rounding allowed in a record's masses (1 - sum(probs) against other)

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any]) -> QQParams:
        """Build from a config mapping, ignoring keys that are not parameters."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in cfg.items() if k in known}
        if "saturation_sensitivity" in kw:
            kw["saturation_sensitivity"] = tuple(float(t) for t in kw["saturation_sensitivity"])
        if "memorization_pairs" in kw:
            kw["memorization_pairs"] = dict(kw["memorization_pairs"])
        return cls(**kw)

    @property
    def region_alpha(self) -> float:
        """The family-wise level of the sampled estimand's region (``sampled_alpha``)."""
        return _ESTIMAND.alpha if self.sampled_alpha is None else self.sampled_alpha

    def recorded(self) -> QQParams:
        """The parameters as a run's results record them: ``sampled_alpha`` only where the
        sampled estimand decided on sampling error, the pairs in sorted order."""
        return dataclasses.replace(
            self,
            sampled_alpha=self.region_alpha if self.estimand == "sampled" else None,
            memorization_pairs=dict(sorted(self.memorization_pairs.items())),
        )
