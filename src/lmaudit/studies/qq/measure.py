"""Measuring the QQ design: gate G1 (fail fast), the estimand's positions (log-probabilities,
samples, or a mixture's components), then gate G3's spot checks, through the cache; and the
rows a label log-prob agent (a sim agent) gives for a set of cells."""

from __future__ import annotations

from typing import Any

import numpy as np
from omegaconf import DictConfig

from lmaudit.backends.cached import CachedBackend
from lmaudit.errors import InputError
from lmaudit.studies.base import Measured
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.config import EstimandConfig, G3Config
from lmaudit.studies.qq.diagnostics import g3_check
from lmaudit.studies.qq.gates import g3_counts
from lmaudit.studies.qq.mixture.plan import measure_mixture
from lmaudit.studies.qq.planning import _typed, cells_for, mixture_cells
from lmaudit.studies.qq.positions import (
    g3_cells,
    g3_trajectories_many,
    measure_logprob,
    measure_sampled,
    run_g1,
)
from lmaudit.studies.qq.protocol import Cell
from lmaudit.studies.qq.records import Measurement

__all__ = ["agent_rows", "measure", "position_rows"]


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


def position_rows(cfg: DictConfig, cached: CachedBackend) -> list[dict[str, Any]]:
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


def measure(cfg: DictConfig, cached: CachedBackend | None) -> Measured:
    """Every measurement row (:func:`position_rows`); measuring needs a backend."""
    if cached is None:
        raise InputError("study qq: measuring needs a backend")
    return Measured(position_rows(cfg, cached))


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
