"""The QQ health gates as the results record them; G1 and G3 from measurement rows (G2 comes
with the analysis's mass, :meth:`lmaudit.studies.qq.results.Mass.gate`)."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np

from lmaudit.errors import InputError
from lmaudit.results import OMIT_NONE, JsonRecord
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.diagnostics import g3_check
from lmaudit.studies.qq.records import Measurement

__all__ = [
    "G1Gate",
    "G2Gate",
    "G3Check",
    "G3Gate",
    "Gates",
    "LabelPieces",
    "g3_counts",
    "gate_g1",
    "gate_g3",
    "split_rows",
]


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


class LabelPieces(JsonRecord):
    """The token pieces one answer label became in a rendered context."""

    label: str
    pieces: tuple[str, ...]


class G1Gate(JsonRecord):
    """Gate G1: every answer label is one token (NOT_RUN: no check recorded)."""

    status: str  # PASS | FAIL | NOT_RUN
    checked: int
    failed: Annotated[int | None, OMIT_NONE] = None
    label_pieces: Annotated[tuple[LabelPieces, ...] | None, OMIT_NONE] = None  # the first 20


class G2Gate(JsonRecord):
    """Gate G2: the mass off the labels stays below ``threshold`` at every position."""

    status: str
    max_other: float
    threshold: float
    max_envelope_width: float


class G3Check(JsonRecord, kw_only=True):
    """One sampled spot check of an item-order: its log-prob joint against the Clopper-Pearson
    intervals of the accepted trajectories' counts (the cells, when any draw was accepted and
    the log-prob joint is defined)."""

    item: str
    mapping: str
    order: str
    attempt: int
    n: int  # draws accepted (the counts' total, when compared)
    accepted: int
    attempts: dict[str, int]  # draws per position
    undefined: Annotated[str | None, OMIT_NONE] = None
    alpha: Annotated[float | None, OMIT_NONE] = None  # family level per item-order
    alpha_cell: Annotated[float | None, OMIT_NONE] = None  # Bonferroni level per joint cell
    logprob_joint: Annotated[tuple[tuple[float, ...], ...] | None, OMIT_NONE] = None
    counts: Annotated[tuple[tuple[int, ...], ...] | None, OMIT_NONE] = None
    low: Annotated[tuple[tuple[float, ...], ...] | None, OMIT_NONE] = None
    high: Annotated[tuple[tuple[float, ...], ...] | None, OMIT_NONE] = None
    inside: Annotated[tuple[tuple[bool, ...], ...] | None, OMIT_NONE] = None
    passed: bool
    complete: bool


class G3Gate(JsonRecord):
    """Gate G3: sampled trajectories agree with the log-prob joints (NOT_RUN: none sampled)."""

    status: str
    checks: tuple[G3Check, ...]
    alpha: Annotated[float | None, OMIT_NONE] = None
    retries: Annotated[int | None, OMIT_NONE] = None


class Gates(JsonRecord):
    G1: G1Gate
    G2: G2Gate
    G3: G3Gate

    def statuses(self) -> dict[str, str]:
        return {"G1": self.G1.status, "G2": self.G2.status, "G3": self.G3.status}


def gate_g1(g1: list[dict[str, Any]]) -> G1Gate:
    if not g1:
        return G1Gate("NOT_RUN", 0)
    bad = [r for r in g1 if any(len(v) != 1 for v in r["pieces"].values())]
    pieces = sorted({(str(k), tuple(str(x) for x in v)) for r in g1 for k, v in r["pieces"].items()})
    return G1Gate(
        "FAIL" if bad else "PASS", len(g1), len(bad), tuple(LabelPieces(k, v) for k, v in pieces[:20])
    )


def gate_g3(g3_rows: list[dict[str, Any]], positions: list[Measurement], alpha: float) -> G3Gate:
    if not g3_rows:
        return G3Gate("NOT_RUN", ())
    by_pos = {
        (m.item, m.mapping, m.order, m.position, m.first_answer): m
        for m in positions
        if m.estimand == "logprob"
    }
    checks: list[G3Check] = []
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
        common = {
            "item": key[0],
            "mapping": key[1],
            "order": key[2],
            "attempt": r["attempt"],
            "accepted": r["accepted"],
            "attempts": r["attempts"],
            "complete": bool(r["complete"]),
        }
        if not np.all(np.isfinite(joint)):  # p_y = p_n = 0 at a position: nothing to compare with
            why = "no probability on either label at a position: the log-prob joint is undefined"
            check = G3Check(**common, n=r["n"], undefined=why, passed=False)
        elif r["accepted"] > 0:
            res = g3_check(joint, g3_counts(r), alpha)
            check = G3Check(
                **common,
                n=res.n,
                alpha=res.alpha,
                alpha_cell=res.alpha_cell,
                logprob_joint=_rows(res.logprob_joint.tolist()),
                counts=_rows(res.counts.tolist()),
                low=_rows(res.low.tolist()),
                high=_rows(res.high.tolist()),
                inside=_rows(res.inside.tolist()),
                passed=bool(res.passed and r["complete"]),
            )
        else:
            check = G3Check(**common, n=r["n"], passed=False)
        checks.append(check)
        final[key] = check.passed  # the last attempt decides
    status = "PASS" if all(final.values()) else "FAIL"
    return G3Gate(status, tuple(checks), alpha, sum(1 for c in checks if c.attempt > 1))


def _rows(a: list[list[Any]]) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(row) for row in a)
