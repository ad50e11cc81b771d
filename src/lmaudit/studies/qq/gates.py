"""The QQ health gates G1 and G3 from measurement rows (G2 comes with the analysis)."""

from __future__ import annotations

from typing import Any

import numpy as np

from lmaudit.errors import InputError
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.diagnostics import g3_check
from lmaudit.studies.qq.records import Measurement

__all__ = ["g3_counts", "gate_g1", "gate_g3", "split_rows"]


def g3_counts(row: dict[str, Any]) -> np.ndarray:
    c = row["joint_counts"]
    return np.array([[c["yy"], c["yn"]], [c["ny"], c["nn"]]])


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


def gate_g1(g1: list[dict[str, Any]]) -> dict[str, Any]:
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


def gate_g3(g3_rows: list[dict[str, Any]], positions: list[Measurement], alpha: float) -> dict[str, Any]:
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
        with np.errstate(invalid="ignore"):  # 0 / 0 where p_y = p_n = 0: undefined, NaN
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
        if not np.all(np.isfinite(joint)):  # p_y = p_n = 0 at a position: nothing to compare with
            entry["undefined"] = (
                "no probability on either label at a position: the log-prob joint is undefined"
            )
            ok = False
        elif r["accepted"] > 0:
            res = g3_check(joint, g3_counts(r), alpha)
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
