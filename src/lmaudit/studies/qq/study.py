"""The QQ study behind the pipeline: plan, measure, analyze (report lives in :mod:`.report`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.backends.registry import build_backend
from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import InputError
from lmaudit.reporting.page import read_rows
from lmaudit.studies.base import Measured, Measurements, Plan, RunContext, Study, StudyResult, typed
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.analysis_bank import (
    bank_digest,
    check_against_bank,
    load_analysis_bank,
    memorization_pairs,
)
from lmaudit.studies.qq.config import (
    EstimandConfig,
    FramingConfig,
    G3Config,
    ItemsConfig,
    MappingConfig,
    QQStudyConfig,
)
from lmaudit.studies.qq.diagnostics import g3_check
from lmaudit.studies.qq.estimation import QQParams, analyze
from lmaudit.studies.qq.gates import g3_counts, gate_g1, gate_g3, split_rows
from lmaudit.studies.qq.items import Item, load_bank
from lmaudit.studies.qq.positions import (
    g3_cells,
    g3_trajectories_many,
    measure_logprob,
    measure_sampled,
    run_g1,
)
from lmaudit.studies.qq.mixture.analysis import analyze_mixture
from lmaudit.studies.qq.mixture.plan import components_of, measure_mixture, mixture_plan, persona_cells
from lmaudit.studies.qq.protocol import Cell, build_cells
from lmaudit.studies.qq.records import Measurement, check_label_assignment
from lmaudit.studies.qq.report.page import render_report
from lmaudit.studies.qq.selection import select_items
from lmaudit.studies.qq.views import headline, metrics, plot_data, summary, tags
from lmaudit.studies.registry import register_study

__all__ = ["QQStudy", "agent_rows", "analyze_rows", "cells_for", "load_items", "mixture_cells"]

# the columns `lmaudit compare` shows for this study's runs
COMPARE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("framing", "param:framing.name", "how the question pair is put to the model (framing group)"),
    ("mapping", "param:mapping.name", "which answer labels stand for yes and no (mapping group)"),
    ("estimand", "param:estimand.kind", "what is estimated from the answers (estimand group)"),
    ("items", "metric:n_items", "question pairs analysed"),
    ("SAT", "metric:n_satisfied", "items whose QQ equality holds (within epsilon)"),
    ("VIOL", "metric:n_violated", "items that violate the QQ equality"),
    ("IND", "metric:n_indeterminate", "items whose QQ verdict is indeterminate"),
    ("NC", "metric:n_gamma_noncontextual", "items whose Gamma class is noncontextual"),
    ("CTX", "metric:n_gamma_contextual", "items whose Gamma class is contextual"),
    ("saturated", "metric:n_saturated", "items with saturated answer probabilities"),
    ("G1", "tag:gate.G1", "gate G1 (every answer label is one token): PASS or FAIL"),
    ("G2", "tag:gate.G2", "gate G2 (mass off the labels < 0.01 at every position): PASS or FAIL"),
    ("G3", "tag:gate.G3", "gate G3 (spot check of sampled trajectories): PASS or FAIL"),
)
_typed = typed


def load_items(cfg: DictConfig) -> list[Item]:
    path = Path(cfg.study["items"].path)
    if not path.exists() and Path("data.dvc").exists() and not Path("data").exists():
        raise InputError(
            f"{path}: the study inputs are not checked out; run `make data` (dvc pull data.dvc) first"
        )
    bank = load_bank(path)
    ids = list(cfg.study["items"].ids) if cfg.study["items"].ids is not None else None
    return select_items(bank, ids, track_p_only=bool(cfg.study.framing.track_p_only))


def cells_for(cfg: DictConfig) -> list[Cell]:
    framing: FramingConfig = _typed(cfg.study.framing, FramingConfig)
    mapping: MappingConfig = _typed(cfg.study.mapping, MappingConfig)
    return build_cells(load_items(cfg), framing, mapping)


def mixture_cells(cfg: DictConfig) -> list[Cell]:
    """``estimand=mixture``: the cells of its personas (the plain cells are :func:`cells_for`'s);
    InputError naming the field for an unknown persona or bad weights, before any model call."""
    est: EstimandConfig = _typed(cfg.study.estimand, EstimandConfig)
    if est.kind != "mixture":
        return []
    assert est.mixture is not None
    if cfg.model.get("backend") != "sim" and any(
        c.weight_ba is not None and c.weight_ba != c.weight for c in est.mixture.components
    ):
        raise InputError(
            "study.estimand.mixture.components: order-dependent weights (weight_ba != weight) are a "
            "check of the sim agents only (Prop. 7's violation channel), not a design for a model"
        )
    framing: FramingConfig = _typed(cfg.study.framing, FramingConfig)
    mapping: MappingConfig = _typed(cfg.study.mapping, MappingConfig)
    return persona_cells(load_items(cfg), framing, mapping, est.mixture, components_of(est.mixture))


def plan(cfg: DictConfig) -> Plan:
    """The resolved plan: config, input digests and every prompt, with its digest."""
    cells = cells_for(cfg)
    resolved = QQStudy().plan_config(cfg)
    items_path = Path(cfg.study["items"].path)
    extra = mixture_cells(cfg)
    body: dict[str, Any] = {
        "study": QQStudy.name,
        "config": resolved,
        "inputs": {"items": {"path": str(items_path), "sha256": file_sha256(items_path)}},
        "cells": [
            {
                "item": c.item.id,
                "mapping": c.mapping,
                "order": c.order,
                "label_of": c.label_of,
                "labels": list(c.labels),
                "prompts": [list(r.messages) for r in c.requests],
            }
            for c in cells
        ],
    }
    if cfg.study.estimand.kind == "mixture":
        mix = _typed(cfg.study.estimand, EstimandConfig).mixture
        body["inputs"]["personas"] = {
            "path": str(mix.personas_path),
            "sha256": file_sha256(mix.personas_path),
        }
        body["mixture"] = mixture_plan(mix, components_of(mix), extra)
    return Plan.make(body, 3 * (len(cells) + len(extra)))


def _cell_joint(rows: list[dict[str, Any]], cell: Cell) -> np.ndarray:
    """Binary-conditioned log-prob joint of one cell, ``[first, second]``, 0 = y."""
    by = {
        (r["position"], r["first_answer"]): r
        for r in rows
        if r.get("kind") == "position"
        and (r["item"], r["mapping"], r["order"]) == cell.key
        and r["estimand"] == "logprob"
    }
    p = []
    for key in ((1, None), (2, "y"), (2, "n")):
        r = by[key]
        with np.errstate(invalid="ignore"):  # 0 / 0 where p_y = p_n = 0: undefined, NaN
            p.append(
                float(env.binary_conditioned(r["probs"][cell.label_of["y"]], r["probs"][cell.label_of["n"]]))
            )
    first, gy, gn = p
    return np.array([[first * gy, first * (1 - gy)], [(1 - first) * gn, (1 - first) * (1 - gn)]])


def measure(cfg: DictConfig, cached: CachedBackend) -> list[dict[str, Any]]:
    """All measurement rows: G1 (fail fast), the estimand's positions, then G3 spot checks."""
    backend = cached.backend
    cells = cells_for(cfg)
    est: EstimandConfig = _typed(cfg.study.estimand, EstimandConfig)
    extra = mixture_cells(cfg)
    rows = run_g1(cells + extra, backend)
    if est.kind == "mixture":
        if (
            est.mixture is not None
            and est.mixture.base == "logprob"
            and not hasattr(backend, "label_logprobs")
        ):
            raise InputError(
                "estimand=mixture with base logprob needs a backend with label log-probabilities"
            )
        measured, logprob_rows = measure_mixture(cells, extra, cached, est, int(cfg.study.top_k))
        rows += measured
    else:
        logprob_rows = (
            measure_logprob(cells, cached, int(cfg.study.top_k)) if hasattr(backend, "label_logprobs") else []
        )
        if est.kind == "logprob":
            rows += logprob_rows
        elif est.kind == "sampled":
            rows += measure_sampled(cells, cached, est) + logprob_rows
        else:
            raise InputError(
                f"estimand: field 'kind' = {est.kind!r} is not 'logprob', 'sampled' or 'mixture'"
            )
    g3: G3Config = _typed(cfg.study.gates.g3, G3Config)
    if g3.enabled and logprob_rows and hasattr(backend, "sample"):
        # the spot-check cells side by side (the same draws as one cell at a time); a cell whose
        # first attempt is incomplete or fails the check is retried once with retry_n
        spot = g3_cells(cells, g3)
        joints = [_cell_joint(logprob_rows, cell) for cell in spot]  # before any draw
        firsts = g3_trajectories_many(spot, cached, g3, g3.n, attempt=1)
        # a cell whose log-prob joint is undefined (p_y = p_n = 0 at a position) has nothing to
        # agree with: not retried, and failed by the analysis (gates.gate_g3)
        retry = [
            k
            for k, (joint, first) in enumerate(zip(joints, firsts, strict=True))
            if np.all(np.isfinite(joint))
            and not (first["complete"] and g3_check(joint, g3_counts(first), g3.alpha).passed)
        ]
        redone = g3_trajectories_many([spot[k] for k in retry], cached, g3, g3.retry_n, attempt=2)
        again = dict(zip(retry, redone, strict=True))
        for k, first in enumerate(firsts):
            rows += [first, again[k]] if k in again else [first]
    return rows


def _samples(est: Mapping[str, Any]) -> bool:
    """Whether an estimand config samples (``sampled``, or a mixture over the sampled base)."""
    mix = est.get("mixture")
    return est.get("kind") == "sampled" or (
        est.get("kind") == "mixture" and isinstance(mix, Mapping) and mix.get("base") == "sampled"
    )


def analysis_params(cfg: DictConfig, pairs: dict[str, str]) -> QQParams:
    study = QQStudy().plan_config(cfg)["study"]
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


def analyze_rows(cfg: DictConfig, rows: list[dict[str, Any]], source: str) -> dict[str, Any]:
    """Pure: measurement rows + config in, results dict out (no model, no clock)."""
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
            result = analyze(positions, params).to_json()
        except ValueError as e:
            raise InputError(f"{source}: {e}") from None
    mass = result["mass"]
    g2 = {
        "status": "PASS" if mass["g2_pass"] else "FAIL",
        "max_other": mass["max_other"],
        "threshold": mass["g2_max_other"],
        "max_envelope_width": mass["max_envelope_width"],
    }
    gates = {
        "G1": gate_g1(g1),
        "G2": g2,
        "G3": gate_g3(g3_rows, positions, float(cfg.study.gates.g3.alpha)),
    }
    result["gates"] = gates
    return result


def agent_rows(cells: list[Cell], agent: Any, estimand: str, tag: dict[str, Any]) -> list[dict[str, Any]]:
    """Position rows of a label log-prob agent (e.g. a sim agent) for ``cells``, with ``tag``."""
    rows: list[dict[str, Any]] = []
    for cell in cells:
        for req, res in zip(cell.requests, agent.label_logprobs(list(cell.requests)), strict=True):
            rows.append(
                {
                    "kind": "position",
                    **Measurement(
                        item=cell.item.id,
                        stratum=cell.item.stratum,
                        mapping=cell.mapping,
                        order=cell.order,
                        position=int(req.meta["position"]),
                        question=str(req.meta["question"]),
                        first_answer=req.meta["first_answer"],
                        label_of=dict(cell.label_of),
                        probs=dict(res.probs),
                        other=res.other,
                        estimand=estimand,
                    ).to_json(),
                    **({} if cell.persona is None else {"persona": cell.persona}),
                    **tag,
                }
            )
    return rows


def results_template(cfg: DictConfig) -> dict[str, Any]:
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


@register_study
class QQStudy(Study):
    """Question-order effects and the QQ equality (seed 000)."""

    name = "qq"
    # metrics.json, for `dvc metrics show` (MLflow gets every metric)
    dvc_metrics = ("n_items", "n_violated", "n_gamma_contextual", "max_other_mass")
    config = QQStudyConfig
    groups: ClassVar[Mapping[str, type]] = {
        "estimand": EstimandConfig,
        "framing": FramingConfig,
        "mapping": MappingConfig,
        "items": ItemsConfig,
    }
    compare_columns = COMPARE_COLUMNS
    has_yaml = True

    def plan_config(self, cfg: DictConfig) -> dict[str, Any]:
        """The shared resolved config; ``estimand.mixture`` only where the estimand is a mixture,
        ``estimand.alpha`` only where something is sampled (a log-prob plan has no sampling error)."""
        out = super().plan_config(cfg)
        est = out.get("estimand")
        if isinstance(est, dict):
            drop = {"mixture"} if est.get("mixture", 0) is None else set()
            if not _samples(est):
                drop.add("alpha")
            out["estimand"] = {k: v for k, v in est.items() if k not in drop}
        return out

    def tracked_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Without the sampling fields where nothing is sampled (``estimand.n``, ``top_p``,
        ``seed``; ``temperature`` too on a log-prob run, which a mixture's tempering reads), and
        without gate G3's settings where G3 is off."""
        out = dict(config)
        est = out.get("estimand")
        if isinstance(est, Mapping):
            drop = set() if _samples(est) else {"n", "top_p", "seed"}
            if est.get("kind") == "logprob":
                drop.add("temperature")
            out["estimand"] = {k: v for k, v in est.items() if k not in drop}
        study = out.get("study")
        g3 = (study.get("gates") or {}).get("g3") if isinstance(study, Mapping) else None
        if isinstance(study, Mapping) and isinstance(g3, Mapping) and g3.get("enabled") is False:
            gates = {**study["gates"], "g3": {"enabled": False}}
            out["study"] = {**study, "gates": gates}
        return out

    def default_run_name(self, cfg: DictConfig) -> str:
        s = cfg.study
        return f"{s.framing.name}-{s.mapping.name}-{s.estimand.kind}-{cfg.model.name}"

    def plan(self, ctx: RunContext) -> Plan:
        return plan(ctx.cfg)

    def measure(self, plan: Plan, backend: CachedBackend | None, ctx: RunContext) -> Measured:
        if backend is None:
            raise InputError("study qq: measuring needs a backend")
        return Measured(measure(ctx.cfg, backend))

    def analysis_inputs(self, cfg: DictConfig) -> dict[str, Any]:
        return {"items": bank_digest(cfg.study["items"].path)}

    def analyze(self, cfg: DictConfig, measurements: Measurements) -> StudyResult:
        return self.result(analyze_rows(cfg, measurements.rows, measurements.source))

    headline = staticmethod(headline)  # type: ignore[assignment]
    metrics = staticmethod(metrics)  # type: ignore[assignment]
    tags = staticmethod(tags)  # type: ignore[assignment]
    summary = staticmethod(summary)  # type: ignore[assignment]

    def report(self, result: StudyResult, ctx: RunContext) -> str:
        plan_doc = ctx.plan.doc if ctx.plan is not None else None
        audit = dict(ctx.audit)
        rows = read_rows(audit, ctx.run_dir)
        return render_report(results=result.results, plan=plan_doc, audit=audit, rows=rows)

    def plot_data(self, result: StudyResult) -> dict[str, list[dict[str, Any]]]:
        return plot_data(result.results)

    def results_template(self, cfg: DictConfig) -> Mapping[str, Any] | None:
        return results_template(cfg)
