"""The QQ report's gate sections: G1's label pieces spelt out, G2 with how much mass lies off the
labels, G3's spot checks with their four joint cells unpacked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmaudit.reporting import get as _get
from lmaudit.reporting import num as _num
from lmaudit.studies.qq.report.figures import iter_positions

__all__ = ["gate_views"]

JOINT_CELLS = ("yy", "yn", "ny", "nn")


def _g2(
    results: Mapping[str, Any], gate: Mapping[str, Any], plan: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Gate G2 (falling back to ``results["mass"]``) and how much mass lies off the labels."""
    mass: Mapping[str, Any] = results.get("mass") or {}
    g2 = {
        "max_other": mass.get("max_other"),
        "threshold": mass.get("g2_max_other"),
        "max_envelope_width": mass.get("max_envelope_width"),
        **gate,
    }
    if "status" not in g2 and "g2_pass" in mass:
        g2["status"] = "PASS" if mass["g2_pass"] else "FAIL"
    others = sorted(o for _, p in iter_positions(results) if (o := _num(p.get("other"))) is not None)
    median = others[len(others) // 2] if others else None
    mx = _num(g2.get("max_other"))
    if median is not None and median > 0.5:
        case = "mostly_other"  # e.g. a base model: most mass is not on the labels at most positions
    elif mx is not None and mx > 0.5:
        case = "some_other"
    elif g2.get("status") == "FAIL":
        case = "fail"
    else:
        case = "labels" if mx is not None else "unknown"
    return {
        **g2,
        "median_other": median,
        "case": case,
        "share_mostly_other": sum(o > 0.5 for o in others) / len(others) if others else None,
        "base_model": bool(_get(plan, "config", "model", "base_model", default=False)),
    }


def _at(a: Any, r: int, k: int) -> Any:
    try:
        return a[r][k]
    except (TypeError, IndexError, KeyError):
        return None


def _g3(gate: Mapping[str, Any]) -> dict[str, Any]:
    """Gate G3 with each check's four joint cells unpacked (log-prob value, CP interval, inside)."""
    checks = []
    for c in gate.get("checks") or []:
        arrays = [c.get(k) for k in ("logprob_joint", "low", "high", "inside")]
        cells = [
            dict(zip(("lp", "lo", "hi", "inside"), (_at(a, *divmod(i, 2)) for a in arrays), strict=True))
            for i in range(len(JOINT_CELLS))
        ]
        att = c.get("attempts")  # draws per position (dict) as the study records them, or a total
        per_position = att if isinstance(att, Mapping) else {}
        draws = sum(v for v in per_position.values() if _num(v) is not None) if per_position else att
        detail = ", ".join(f"{k} {v}" for k, v in sorted(per_position.items()))
        checks.append({**c, "cells": cells, "draws": draws, "draws_detail": detail})
    return {**gate, "checks": checks}


def _g1(gate: Mapping[str, Any]) -> dict[str, Any]:
    """Gate G1 with each recorded label's pieces written ``label → piece + piece``."""
    pieces = [f"{p['label']} → {' + '.join(p['pieces'])}" for p in gate.get("label_pieces") or []]
    return {**gate, "label_pieces": pieces}


def gate_views(results: Mapping[str, Any], plan: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The three gates as the page shows them (G1 pieces spelt out, G2 with the mass off the
    labels, G3's joint cells unpacked)."""
    gates: Mapping[str, Any] = results.get("gates") or {}
    return {
        "G1": _g1(gates.get("G1") or {}),
        "G2": _g2(results, gates.get("G2") or {}, plan),
        "G3": _g3(gates.get("G3") or {}),
    }
