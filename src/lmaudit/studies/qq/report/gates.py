"""The QQ report's gate sections: G1's label pieces spelt out, G2 with how much mass lies off the
labels, G3's spot checks with their four joint cells unpacked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lmaudit.reporting import get as _get
from lmaudit.studies.qq.report.figures import iter_positions

if TYPE_CHECKING:
    from lmaudit.studies.qq.gates import G1Gate, G3Check, G3Gate
    from lmaudit.studies.qq.results import QQResults

__all__ = ["gate_views"]

JOINT_CELLS = ("yy", "yn", "ny", "nn")


def _g1(gate: G1Gate) -> dict[str, Any]:
    """Gate G1 with each recorded label's pieces written ``label → piece + piece``."""
    return {
        "status": gate.status,
        "checked": gate.checked,
        "failed": gate.failed or 0,
        "label_pieces": [f"{p.label} → {' + '.join(p.pieces)}" for p in gate.label_pieces or ()],
    }


def _g2(results: QQResults, plan: Mapping[str, Any] | None) -> dict[str, Any]:
    """Gate G2 and how much mass lies off the labels."""
    g2 = results.gates.G2
    others = sorted(p.other for _, p in iter_positions(results))
    median = others[len(others) // 2] if others else None
    if median is not None and median > 0.5:
        case = "mostly_other"  # e.g. a base model: most mass is not on the labels at most positions
    elif g2.max_other > 0.5:
        case = "some_other"
    elif g2.status == "FAIL":
        case = "fail"
    else:
        case = "labels"
    return {
        "status": g2.status,
        "max_other": g2.max_other,
        "threshold": g2.threshold,
        "max_envelope_width": g2.max_envelope_width,
        "median_other": median,
        "case": case,
        "share_mostly_other": sum(o > 0.5 for o in others) / len(others) if others else None,
        "base_model": bool(_get(plan, "config", "model", "base_model", default=False)),
    }


def _check(c: G3Check) -> dict[str, Any]:
    """One spot check with its four joint cells unpacked (log-prob value, CP interval, inside)."""
    cells = []
    for i in range(len(JOINT_CELLS)):
        r, k = divmod(i, 2)
        arrays = (c.logprob_joint, c.low, c.high, c.inside)
        cells.append(
            dict(
                zip(
                    ("lp", "lo", "hi", "inside"),
                    (None if a is None else a[r][k] for a in arrays),
                    strict=True,
                )
            )
        )
    return {
        "item": c.item,
        "mapping": c.mapping,
        "order": c.order,
        "attempt": c.attempt,
        "n": c.n,
        "accepted": c.accepted,
        "complete": c.complete,
        "passed": c.passed,
        "cells": cells,
        "draws": sum(c.attempts.values()),
        "draws_detail": ", ".join(f"{k} {v}" for k, v in sorted(c.attempts.items())),
    }


def _g3(gate: G3Gate) -> dict[str, Any]:
    """Gate G3 with each check's four joint cells unpacked."""
    return {
        "status": gate.status,
        "alpha": gate.alpha,
        "retries": gate.retries or 0,
        "checks": [_check(c) for c in gate.checks],
    }


def gate_views(results: QQResults, plan: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The three gates as the page shows them (G1 pieces spelt out, G2 with the mass off the
    labels, G3's joint cells unpacked)."""
    return {"G1": _g1(results.gates.G1), "G2": _g2(results, plan), "G3": _g3(results.gates.G3)}
