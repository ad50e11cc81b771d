"""The QQ study behind the pipeline: plan, measure, analyze (report lives in :mod:`.report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from lmaudit.backends.cached import CachedBackend
from lmaudit.config.schema import EstimandConfig, FramingConfig, G3Config, MappingConfig
from lmaudit.provenance.digest import file_sha256, json_digest
from lmaudit.provenance.io import InputError
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.analysis import QQParams, analyze
from lmaudit.studies.qq.diagnostics import g3_check
from lmaudit.studies.qq.items import Item, load_bank, select_items
from lmaudit.studies.qq.measure import (
    g3_cells,
    g3_trajectories,
    measure_logprob,
    measure_sampled,
    run_g1,
)
from lmaudit.studies.qq.protocol import Cell, build_cells
from lmaudit.studies.qq.records import Measurement, check_label_assignment
from lmaudit.studies.qq.report import write_report

__all__ = ["NAME", "PLAN_KEYS", "analyze_rows", "measure", "plan", "write_report"]

NAME = "qq"
# the columns `lmaudit compare` shows for this study's runs
COMPARE_COLUMNS: list[tuple[str, str]] = [
    ("framing", "param:framing.name"),
    ("mapping", "param:mapping.name"),
    ("estimand", "param:estimand.kind"),
    ("items", "metric:n_items"),
    ("SAT", "metric:n_satisfied"),
    ("VIOL", "metric:n_violated"),
    ("IND", "metric:n_indeterminate"),
    ("NC", "metric:n_gamma_noncontextual"),
    ("CTX", "metric:n_gamma_contextual"),
    ("saturated", "metric:n_saturated"),
    ("G1", "tag:gate.G1"),
    ("G2", "tag:gate.G2"),
    ("G3", "tag:gate.G3"),
]
# The config keys that define what is asked and how it is decided (the plan digest covers them).
PLAN_KEYS = ("study", "model", "estimand", "framing", "mapping", "items")


def _typed(node: Any, cls: type) -> Any:
    """A config node as its schema dataclass instance."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), node))


def default_run_name(cfg: DictConfig) -> str:
    return f"{cfg.model.name}-{cfg.framing.name}-{cfg.mapping.name}-{cfg.estimand.kind}"


def load_items(cfg: DictConfig) -> list[Item]:
    path = Path(cfg["items"].path)
    if not path.exists() and Path("data.dvc").exists() and not Path("data").exists():
        raise InputError(
            f"{path}: the study inputs are not checked out; run `make data` (dvc pull data.dvc) first"
        )
    bank = load_bank(path)
    ids = list(cfg["items"].ids) if cfg["items"].ids is not None else None
    return select_items(bank, ids, track_p_only=bool(cfg.framing.track_p_only))


def cells_for(cfg: DictConfig) -> list[Cell]:
    framing: FramingConfig = _typed(cfg.framing, FramingConfig)
    mapping: MappingConfig = _typed(cfg.mapping, MappingConfig)
    return build_cells(load_items(cfg), framing, mapping)


def plan(cfg: DictConfig) -> dict[str, Any]:
    """The resolved plan: config, input digests and every prompt, with its digest."""
    cells = cells_for(cfg)
    resolved = {k: OmegaConf.to_container(cfg[k], resolve=True) for k in PLAN_KEYS}
    items_path = Path(cfg["items"].path)
    body = {
        "study": NAME,
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
    return {**body, "n_requests": 3 * len(cells), "plan_digest": json_digest(body)}


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
        p.append(
            float(env.binary_conditioned(r["probs"][cell.label_of["y"]], r["probs"][cell.label_of["n"]]))
        )
    first, gy, gn = p
    return np.array([[first * gy, first * (1 - gy)], [(1 - first) * gn, (1 - first) * (1 - gn)]])


def _g3_counts(row: dict[str, Any]) -> np.ndarray:
    c = row["joint_counts"]
    return np.array([[c["yy"], c["yn"]], [c["ny"], c["nn"]]])


def measure(cfg: DictConfig, cached: CachedBackend, backend: Any) -> list[dict[str, Any]]:
    """All measurement rows: G1 (fail fast), the estimand's positions, then G3 spot checks."""
    cells = cells_for(cfg)
    est: EstimandConfig = _typed(cfg.estimand, EstimandConfig)
    rows = run_g1(cells, backend)
    logprob_rows = (
        measure_logprob(cells, cached, int(cfg.study.top_k)) if hasattr(backend, "label_logprobs") else []
    )
    if est.kind == "logprob":
        rows += logprob_rows
    elif est.kind == "sampled":
        rows += measure_sampled(cells, cached, est) + logprob_rows
    else:
        raise InputError(f"estimand: field 'kind' = {est.kind!r} is not 'logprob' or 'sampled'")
    g3: G3Config = _typed(cfg.study.gates.g3, G3Config)
    if g3.enabled and logprob_rows and hasattr(backend, "sample"):
        for cell in g3_cells(cells, g3):
            joint = _cell_joint(logprob_rows, cell)
            first = g3_trajectories(cell, cached, g3, g3.n, attempt=1)
            rows.append(first)
            if first["complete"] and g3_check(joint, _g3_counts(first), g3.alpha).passed:
                continue
            rows.append(g3_trajectories(cell, cached, g3, g3.retry_n, attempt=2))
    return rows


def split_rows(
    rows: list[dict[str, Any]], source: str
) -> tuple[list[Measurement], list[dict[str, Any]], list[dict[str, Any]]]:
    positions, g1, g3 = [], [], []
    for i, r in enumerate(rows, start=1):
        kind = r.get("kind", "position")
        if kind == "position":
            try:
                positions.append(Measurement.from_json(r))
            except (TypeError, ValueError) as e:
                raise InputError(f"{source}: record {i}: {e}") from None
        elif kind == "g1":
            g1.append(r)
        elif kind == "g3":
            g3.append(r)
        else:
            raise InputError(f"{source}: record {i}: field 'kind' = {kind!r} is not position, g1 or g3")
    return positions, g1, g3


def _gate_g1(g1: list[dict[str, Any]]) -> dict[str, Any]:
    if not g1:
        return {"status": "NOT_RUN", "checked": 0}
    bad = [r for r in g1 if any(len(v) != 1 for v in r["pieces"].values())]
    pieces = sorted({f"{k}={v}" for r in g1 for k, v in r["pieces"].items()})
    return {
        "status": "FAIL" if bad else "PASS",
        "checked": len(g1),
        "failed": len(bad),
        "label_pieces": pieces[:20],
    }


def _gate_g3(g3_rows: list[dict[str, Any]], positions: list[Measurement], alpha: float) -> dict[str, Any]:
    if not g3_rows:
        return {"status": "NOT_RUN", "checks": []}
    by_pos = {
        (m.item, m.mapping, m.order, m.position, m.first_answer): m
        for m in positions
        if m.estimand == "logprob"
    }
    checks = []
    final: dict[tuple[str, str, str], bool] = {}
    for r in sorted(g3_rows, key=lambda r: (r["item"], r["mapping"], r["order"], r["attempt"])):
        key = (r["item"], r["mapping"], r["order"])
        try:
            ms = [by_pos[(*key, 1, None)], by_pos[(*key, 2, "y")], by_pos[(*key, 2, "n")]]
        except KeyError:
            raise InputError(f"G3 record for {key} has no log-prob positions to compare with") from None
        f, gy, gn = (float(env.binary_conditioned(m.p_y, m.p_n)) for m in ms)
        joint = np.array([[f * gy, f * (1 - gy)], [(1 - f) * gn, (1 - f) * (1 - gn)]])
        entry: dict[str, Any] = {
            "item": key[0],
            "mapping": key[1],
            "order": key[2],
            "attempt": r["attempt"],
            "n": r["n"],
            "accepted": r["accepted"],
            "attempts": r["attempts"],
        }
        if r["accepted"] > 0:
            res = g3_check(joint, _g3_counts(r), alpha)
            entry.update(res.to_json())
            ok = bool(res.passed and r["complete"])
        else:
            ok = False
        entry["passed"] = ok
        entry["complete"] = bool(r["complete"])
        checks.append(entry)
        final[key] = ok  # the last attempt decides
    status = "PASS" if all(final.values()) else "FAIL"
    return {
        "status": status,
        "alpha": alpha,
        "checks": checks,
        "retries": sum(1 for c in checks if c["attempt"] > 1),
    }


def analysis_params(cfg: DictConfig, items: list[Item]) -> QQParams:
    study = OmegaConf.to_container(cfg.study, resolve=True)
    assert isinstance(study, dict)
    ids = {it.id for it in items}
    pairs = (
        {it.id: it.matched_to for it in items if it.matched_to and it.matched_to in ids}
        if cfg["items"].matched_pairs
        else {}
    )
    return QQParams.from_mapping(
        {
            **{str(k): v for k, v in study.items()},
            "g2_max_other": cfg.study.gates.g2_max_other,
            "memorization_pairs": pairs,
            "estimand": cfg.estimand.kind,
        }
    )


def analyze_rows(cfg: DictConfig, rows: list[dict[str, Any]], source: str) -> dict[str, Any]:
    """Pure: measurement rows + config in, results dict out (no model, no clock)."""
    positions, g1, g3_rows = split_rows(rows, source)
    items = load_items(cfg)
    known = {it.id for it in load_bank(cfg["items"].path).items}
    unknown = sorted({m.item for m in positions} - known)
    if unknown:
        raise InputError(f"{source}: items {unknown} are not in the item bank {cfg['items'].path}")
    check_label_assignment(positions, cfg.mapping.labels, cfg.mapping.yesno_labels, source)
    params = analysis_params(cfg, items)
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
        "G1": _gate_g1(g1),
        "G2": g2,
        "G3": _gate_g3(g3_rows, positions, float(cfg.study.gates.g3.alpha)),
    }
    result["gates"] = gates
    return result


def headline(results: dict[str, Any]) -> float:
    """The share of items whose QQ verdict is VIOLATED (returned to Hydra sweepers)."""
    n = results["n_items"]
    return results["counts"]["verdict"]["VIOLATED"] / n if n else float("nan")


def metrics(results: dict[str, Any]) -> dict[str, float]:
    c = results["counts"]
    out: dict[str, float] = {
        "n_items": results["n_items"],
        "n_saturated": c["saturated"],
        "max_other_mass": results["mass"]["max_other"],
        "max_envelope_width": results["mass"]["max_envelope_width"],
        "share_violated": headline(results),
    }
    out.update({f"n_{k.lower()}": v for k, v in c["verdict"].items()})
    out.update({f"n_gamma_{k.lower()}": v for k, v in c["gamma_class"].items()})
    for row in results["saturation"]["sensitivity"]:
        out[f"n_saturated_at_{row['threshold']}"] = row["n_saturated"]
    for it in results["items"]:
        out[f"q.{it['item']}"] = it["q"]
        out[f"oss.{it['item']}"] = it["oss"]
    return out


def plot_data(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Figure data for ``dvc plots``: the distance-from-determinism CDF and the label-effect scatter."""
    positions = []
    for it in results["items"]:
        for m in it["mappings"]:
            for cell in m["cells"]:
                for p in cell["positions"]:
                    positions.append(
                        {
                            "item": it["item"],
                            "stratum": it["stratum"],
                            "mapping": m["mapping"],
                            "order": cell["order"],
                            "position": p["position"],
                            "first_answer": p["first_answer"] or "",
                            "d": p["d"],
                        }
                    )
    positions.sort(key=lambda r: r["d"])
    n = len(positions)
    cdf = [{**r, "cdf": (i + 1) / n} for i, r in enumerate(positions)]
    scatter = []
    for it in results["items"]:
        by = {m["mapping"]: m for m in it["mappings"]}
        if "map1" in by and "map2" in by:
            scatter.append(
                {
                    "item": it["item"],
                    "q_map1": by["map1"]["q"],
                    "q_map2": by["map2"]["q"],
                    "oss_map1": by["map1"]["oss"],
                    "oss_map2": by["map2"]["oss"],
                }
            )
    return {"distance_cdf": cdf, "label_effect": scatter}


def tags(results: dict[str, Any]) -> dict[str, str]:
    t = {f"gate.{g}": v["status"] for g, v in results["gates"].items()}
    mem = results.get("memorization")
    if mem is not None:
        t["memorization_alert"] = str(mem.get("alert"))
    return t


def summary(results: dict[str, Any]) -> str:
    c = results["counts"]
    v = c["verdict"]
    g = c["gamma_class"]
    gates = ", ".join(f"{k} {x['status']}" for k, x in results["gates"].items())
    return (
        f"QQ: {results['n_items']} items | SATISFIED {v['SATISFIED']}, VIOLATED {v['VIOLATED']}, "
        f"INDETERMINATE {v['INDETERMINATE']} | Gamma: NONCONTEXTUAL {g['NONCONTEXTUAL']}, "
        f"CONTEXTUAL {g['CONTEXTUAL']}, INDETERMINATE {g['INDETERMINATE']} | saturated "
        f"{c['saturated']}/{results['n_items']} | gates: {gates} | max other mass "
        f"{results['mass']['max_other']:.3g}"
    )


def results_template(cfg: DictConfig) -> dict[str, Any]:
    """A results dict of this plan's exact shape (from a projective sim agent; no model, no I/O
    beyond the bank), used to check at freeze time that predictions name real metrics."""
    from lmaudit.backends.sim import build_sim_agent

    cells = cells_for(cfg)
    agent = build_sim_agent({"agent": "projective", "seed": 0})
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
                        estimand=str(cfg.estimand.kind),
                    ).to_json(),
                }
            )
    return analyze_rows(cfg, rows, "<template>")
