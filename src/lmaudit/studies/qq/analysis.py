"""From measurement rows to results.json: the bank checks, the estimand's analysis
(:func:`lmaudit.studies.qq.estimation.analyze`, or a mixture's), and the gates G1-G3; and a
results body of a plan's exact shape for checking predictions at freeze time. Pure: no model,
no clock."""

from __future__ import annotations

import dataclasses
from typing import Any

from omegaconf import DictConfig

from lmaudit.backends.registry import build_backend
from lmaudit.errors import InputError
from lmaudit.studies.qq.analysis_bank import (
    check_against_bank,
    load_analysis_bank,
    memorization_pairs,
)
from lmaudit.studies.qq.config import EstimandConfig
from lmaudit.studies.qq.estimation import QQParams, analyze
from lmaudit.studies.qq.gates import Gates, gate_g1, gate_g3, split_rows
from lmaudit.studies.qq.measure import agent_rows
from lmaudit.studies.qq.mixture.analysis import analyze_mixture
from lmaudit.studies.qq.mixture.plan import components_of
from lmaudit.studies.qq.planning import _typed, cells_for, mixture_cells, plan_config
from lmaudit.studies.qq.records import check_label_assignment
from lmaudit.studies.qq.results import QQResults

__all__ = ["analysis_params", "analyze_rows", "results_template"]


def analysis_params(cfg: DictConfig, pairs: dict[str, str]) -> QQParams:
    study = plan_config(cfg)["study"]
    pairs = pairs if cfg.study["items"].matched_pairs else {}
    return QQParams.from_mapping(
        {
            **{str(k): v for k, v in study.items()},
            "g2_max_other": cfg.study.gates.g2_max_other,
            "memorization_pairs": pairs,
            "estimand": cfg.study.estimand.kind,
            "sampled_alpha": cfg.study.estimand.alpha,
        }
    )


def analyze_rows(cfg: DictConfig, rows: list[dict[str, Any]], source: str) -> QQResults:
    """Pure: measurement rows + config in, typed results out (no model, no clock)."""
    positions, g1, g3_rows = split_rows(rows, source)
    bank_path = str(cfg.study["items"].path)
    bank = load_analysis_bank(bank_path)  # ids, strata, options, pairings: all analysis needs
    check_against_bank(positions, bank, source, bank_path)
    check_label_assignment(positions, cfg.study.mapping.labels, cfg.study.mapping.yesno_labels, source)
    params = analysis_params(cfg, memorization_pairs(bank, {m.item for m in positions}))
    if cfg.study.estimand.kind == "mixture":
        est: EstimandConfig = _typed(cfg.study.estimand, EstimandConfig)
        assert est.mixture is not None
        result, positions = analyze_mixture(
            rows, components_of(est.mixture), est.mixture.base, est.temperature, params, source
        )
    else:
        try:
            result = analyze(positions, params).results()
        except ValueError as e:
            raise InputError(f"{source}: {e}") from None
    gates = Gates(
        gate_g1(g1), result.mass.gate(), gate_g3(g3_rows, positions, float(cfg.study.gates.g3.alpha))
    )
    return dataclasses.replace(result, gates=gates)


def results_template(cfg: DictConfig) -> QQResults:
    """A results dict of this plan's exact shape (from a projective sim agent; no model, no I/O
    beyond the banks), used to check at freeze time that predictions name real metrics."""
    cells = cells_for(cfg)
    agent = build_backend({"backend": "sim", "name": "template", "agent": "projective", "seed": 0})
    est: EstimandConfig = _typed(cfg.study.estimand, EstimandConfig)
    if est.mixture is None:
        return analyze_rows(cfg, agent_rows(cells, agent, str(est.kind), {}), "<template>")
    base, extra = est.mixture.base, mixture_cells(cfg)
    rows = agent_rows(cells, agent, base, {})
    if base == "logprob":
        rows += agent_rows(extra, agent, base, {})
    else:
        for c in components_of(est.mixture):
            if c.persona == "none" and c.temperature == est.temperature:
                continue
            mine = cells if c.persona == "none" else [x for x in extra if x.persona == c.persona]
            rows += agent_rows(mine, agent, base, {"persona": c.persona, "temperature": c.temperature})
    return analyze_rows(cfg, rows, "<template>")
