"""The QQ HTML report: written atomically, well-formed, complete, escaped and robust to
missing inputs. Results come from the real analysis run on ``sim`` agent read-outs."""

from __future__ import annotations

import copy
import dataclasses
import re
from html.parser import HTMLParser
from typing import Any

import numpy as np
import pytest

from lmaudit.backends.base import LabelRequest
from lmaudit.backends.sim import build_sim_agent
from lmaudit.studies.envelope import MeasurementSource
from lmaudit.studies.layout import ReportInputs
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.diagnostics import g3_check
from lmaudit.studies.qq.estimation import QQParams, QQResult, analyze
from lmaudit.studies.qq.gates import G1Gate, G3Check, G3Gate, Gates, LabelPieces
from lmaudit.studies.qq.records import Measurement, request_meta
from lmaudit.studies.qq.report.page import render_report
from lmaudit.studies.qq.results import Counts, QQResults

LABEL_OF = {"map1": {"y": "A", "n": "B"}, "map2": {"y": "B", "n": "A"}, "yesno": {"y": "Yes", "n": "No"}}
SIM_ITEMS = {"s1-01": "S1", "s1-02": "S1", "s1-04": "S1", "s2-01": "S2", "s3-01": "S3", "s3-03": "S3"}
# Hand-made semantic P(y) at the six positions (AB: A, B|y, B|n; BA: B, A|y, A|n) per mapping,
# and the other mass: patterns the repetition agent cannot produce.
HAND: dict[str, dict[str, Any]] = {
    "s1-05": {"map1": [0.6, 0.7, 0.4, 0.55, 0.65, 0.45], "map2": [1 - 1e-9, 1e-9, 1e-9, 1e-9, 1e-9, 1e-9]},
    "s1-07": {"map1": [0.5, 0.999, 0.001, 0.5, 0.001, 0.999], "map2": [0.5, 0.998, 0.002, 0.5, 0.002, 0.998]},
    "s1-06": {"map1": [0.5, 0.525, 0.489, 0.5, 0.5, 0.5], "map2": [0.5, 0.525, 0.489, 0.5, 0.5, 0.5], "other": 0.005},
}  # fmt: skip
ITEMS = {**SIM_ITEMS, **dict.fromkeys(HAND, "S1")}
MATCHED = {"s2-01": "s1-01"}
PLAN_DIGEST = "plan" + "0" * 60
MEAS_SHA = "meas" + "1" * 60


def _record(
    item: str, stratum: str, mapping: str, pos: int, probs: dict[str, float], other: float
) -> Measurement:
    order, position, first = env.POSITIONS[pos]
    return Measurement(item, stratum, mapping, order, position, order[position - 1], first, LABEL_OF[mapping],
                       probs=probs, other=other)  # fmt: skip


def _measurements(agent_cfg: dict[str, Any], ab_mappings: tuple[str, ...]) -> list[Measurement]:
    """Every position of every item under the given A/B mappings (Yes/No items: ``yesno``)."""
    agent = build_sim_agent(agent_cfg)
    out = []
    for item, stratum in SIM_ITEMS.items():
        for mapping in ("yesno",) if stratum == "S3" else ab_mappings:
            label_of = LABEL_OF[mapping]
            for i, (order, position, first) in enumerate(env.POSITIONS):
                meta = request_meta(item=item, mapping=mapping, order=order, position=position,
                                    question=order[position - 1], first_answer=first, label_of=label_of)  # fmt: skip
                req = LabelRequest(
                    ({"role": "user", "content": item},), tuple(sorted(label_of.values())), meta
                )
                res = agent.label_logprobs([req])[0]
                out.append(_record(item, stratum, mapping, i, dict(res.probs), res.other))
    for item, spec in HAND.items():
        o = float(spec.get("other", 0.0))
        for mapping in ab_mappings:
            y, n = LABEL_OF[mapping]["y"], LABEL_OF[mapping]["n"]
            for i, p in enumerate(spec[mapping]):
                out.append(_record(item, "S1", mapping, i, {y: (1 - o) * p, n: (1 - o) * (1 - p)}, o))
    return out


def _sampled(m: Measurement, n: int = 50) -> Measurement:
    k_y = round(n * m.p_y / (m.p_y + m.p_n))
    counts = {m.label_of["y"]: k_y, m.label_of["n"]: n - k_y, "other": 0}
    return dataclasses.replace(m, probs={}, other=0.0, estimand="sampled", n_draws=n, counts=counts)


def _g3_entry(result: QQResult, item: str, mapping: str, order: str, attempt: int) -> G3Check:
    """A G3 check as the study records it; attempt 1 gets shuffled counts (a failing check)."""
    joint = next(m for m in result.item(item).mappings if m.mapping == mapping).joint(order).ravel()
    counts = np.round(np.roll(joint, 1 if attempt == 1 and item == "s1-01" else 0) * 200).astype(int)
    res = g3_check(joint.reshape(2, 2), counts.reshape(2, 2), 0.01)

    def rows(a: np.ndarray) -> Any:
        return tuple(tuple(r) for r in a.tolist())

    return G3Check(item=item, mapping=mapping, order=order, attempt=attempt, n=res.n,
                   accepted=int(counts.sum()), attempts={"position1": 231, "position2_y": 120, "position2_n": 97},
                   alpha=res.alpha, alpha_cell=res.alpha_cell, logprob_joint=rows(res.logprob_joint),
                   counts=rows(res.counts), low=rows(res.low), high=rows(res.high), inside=rows(res.inside),
                   passed=res.passed, complete=True)  # fmt: skip


def make_results(
    agent_cfg: dict[str, Any] | None = None,
    ab_mappings: tuple[str, ...] = ("map1", "map2"),
    *,
    sampled: bool = True,
) -> QQResults:
    """The typed results of sim + hand-made records, with gates and ``source``."""
    cfg = agent_cfg or {"agent": "mixture_repetition", "seed": 3, "label_bias": 3.0, "other_mass": 2e-7,
                        "r_AB": {"y": 0.9, "n": 0.1}, "r_BA": {"y": 0.3, "n": 0.8},
                        "items": {"s3-03": {"u": 0.9999, "v": 0.0001}}}  # fmt: skip
    ms = _measurements(cfg, ab_mappings)
    extra = [_sampled(m) for m in ms if m.item == "s1-01"] if sampled else []
    result = analyze(ms + extra, QQParams(memorization_pairs=MATCHED))
    checks = (_g3_entry(result, "s1-01", ab_mappings[0], "AB", 1), _g3_entry(result, "s1-01", ab_mappings[0], "AB", 2),
              _g3_entry(result, "s3-01", "yesno", "BA", 1))  # fmt: skip
    pieces = (LabelPieces("A", ("A",)), LabelPieces("B", ("B",)))
    gates = Gates(G1Gate("PASS", 24, 0, pieces), result.mass.gate(), G3Gate("PASS", checks, 0.01, 1))
    return dataclasses.replace(result.results(gates), source=MeasurementSource(MEAS_SHA))


PLAN: dict[str, Any] = {
    "study": "qq",
    "config": {"study": {"name": "qq"}, "model": {"name": "sim-mixture", "backend": "sim", "base_model": False},
               "estimand": {"kind": "logprob"}, "framing": {"name": "track_m", "track": "M"},
               "mapping": {"name": "counterbalanced", "mappings": ["map1", "map2"]}, "items": {"name": "pilot"}},
    "inputs": {"items": {"path": "data/qq/items/pilot.json", "sha256": "ab" * 32}},
    "cells": [], "n_requests": 120, "plan_digest": PLAN_DIGEST,
}  # fmt: skip
AUDIT: dict[str, Any] = {
    "schema": 1, "lmaudit_version": "0.1.0", "plan_digest": PLAN_DIGEST,
    "plan": {"written_utc": "2026-07-01T10:00:00Z", "git_commit": "deadbeef", "python": "3.11.7", "platform": "x"},
    "measure": {"finished_utc": "2026-07-01T10:01:00Z", "backend_identity": {"backend": "sim", "agent": "mixture"},
                "backend_digest": "bd" * 32, "cache": {"dir": "cache", "hits": 7, "misses": 113, "writes": 113},
                "seconds": {"load": 0.01, "total": 1.5}},
    "analyze": {"finished_utc": "2026-07-01T10:02:00Z", "measurements_sha256": MEAS_SHA},
    "mlflow": {"run_name": "run-12345", "experiment": "lmaudit-qq"},
}  # fmt: skip


class Parsed(HTMLParser):
    """Tables as lists of rows of (row class, cell texts); checks that tags nest and close."""

    CHECKED = frozenset({"html", "body", "table", "tr", "td", "th", "details", "div", "svg", "pre", "p"})

    def __init__(self, text: str) -> None:
        super().__init__()
        self.stack, self.errors, self.text_parts = [], [], []  # type: list[str], list[str], list[str]
        self.tables: list[list[tuple[str, list[str]]]] = []
        self.open_tables: list[list[tuple[str, list[str]]]] = []
        self.cell: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.CHECKED:
            self.stack.append(tag)
        if tag == "table":
            self.open_tables.append([])
        elif tag == "tr" and self.open_tables:
            self.open_tables[-1].append((dict(attrs).get("class") or "", []))
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in self.CHECKED:
            if not self.stack or self.stack[-1] != tag:
                self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            else:
                self.stack.pop()
        if tag in ("td", "th") and self.cell is not None and self.open_tables:
            self.open_tables[-1][-1][1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "table" and self.open_tables:
            self.tables.append(self.open_tables.pop())

    def handle_data(self, data: str) -> None:
        self.text_parts.append(data)
        if self.cell is not None:
            self.cell.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.text_parts).split())

    def table_with(self, header: str) -> list[tuple[str, list[str]]]:
        return next(t for t in self.tables if t and header in t[0][1])


@pytest.fixture(scope="module")
def results() -> QQResults:
    return make_results()


@pytest.fixture(scope="module")
def typed(results: QQResults) -> QQResults:
    return results


def _render(results: QQResults, plan: Any = PLAN, audit: Any = None) -> tuple[str, Parsed]:
    audit = AUDIT if audit is None else audit
    html = render_report(ReportInputs(results, plan, audit))
    return html, Parsed(html)


@pytest.fixture(scope="module")
def report(results: QQResults) -> tuple[str, Parsed]:
    """The full report (both mappings, plan and audit), rendered once for the module."""
    return _render(results)


def test_report_is_well_formed_and_self_contained(report: tuple[str, Parsed]) -> None:
    html, doc = report
    assert html.lstrip().startswith("<!DOCTYPE html>")
    assert doc.errors == [] and doc.stack == [], (doc.errors, doc.stack)
    assert not doc.open_tables and html.count("<table") == html.count("</table>") == len(doc.tables)
    assert "<script" not in html.lower() and "<link" not in html and "<img" not in html
    assert not re.search(r"""(src|href)=["']?(https?:|//)|url\((["']?)(https?:|//)|@import""", html)
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert ids and len(ids) == len(set(ids))  # two inline SVGs, no clashing element ids
    refs = {r for pair in re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', html) for r in pair if r}
    assert refs and refs <= set(ids)
    none = Counts(dict.fromkeys(env.VERDICTS, 0), dict.fromkeys(env.GAMMA_CLASSES, 0), 0)
    minimal = dataclasses.replace(make_results(), n_items=0, items=(), counts=none)
    empty = render_report(ReportInputs(minimal))
    assert "The run could not answer" in empty and "No item was analysed." in empty


def test_every_item_with_its_verdict_and_row_colour(report: tuple[str, Parsed], results: QQResults) -> None:
    _, doc = report
    doc_items = results.to_json()["items"]
    table = doc.table_with("QQ verdict")
    header = table[0][1]
    rows = {cells[0]: (cls, dict(zip(header, cells, strict=True))) for cls, cells in table[1:]}
    assert set(rows) == set(ITEMS)
    css = {"SATISFIED": "sat", "VIOLATED": "viol", "INDETERMINATE": "indet"}
    for it in doc_items:
        cls, row = rows[it["item"]]
        assert row["QQ verdict"] == it["verdict"] and row["Γ class"] == it["gamma_class"]
        assert row["q"] == f"{it['q']:+.3f}" and row["stratum"] == it["stratum"]
        assert row["saturated"] == ("Y" if it["saturated"] else "N")
        assert cls == css[it["verdict"]]
    assert len({r["verdict"] for r in doc_items}) > 1  # the fixture exercises several verdicts


def test_summary_header_gates_and_diagnostics(report: tuple[str, Parsed], typed: QQResults) -> None:
    html, doc = report
    results = typed.to_json()
    v = results["counts"]["verdict"]
    assert f"{v['VIOLATED']} VIOLATED, {v['INDETERMINATE']} INDETERMINATE of {len(ITEMS)} items" in doc.text
    assert f"Saturated: {results['counts']['saturated']} of {len(ITEMS)} items" in doc.text
    assert 'class="badge pass">G1 PASS<' in html and 'class="badge pass">G3 PASS<' in html
    for needle in (PLAN_DIGEST, MEAS_SHA, "sim-mixture", "bd" * 32, "track_m", "run-12345", "ab" * 32):
        assert needle in doc.text, needle
    g3 = doc.table_with("attempt")
    assert len(g3) == 1 + 3 and sum("FAIL" in cells[-1] for _, cells in g3[1:]) == 1
    assert "✗" in doc.text and "retries: 1" in doc.text
    accepted = results["gates"]["G3"]["checks"][0]["accepted"]  # draws: total, then per position
    assert g3[1][1][5] == f"{accepted} / 448position1 231, position2_n 97, position2_y 120"
    assert len(doc.table_with("RMSE")) == 1 + len(results["fits"])
    assert doc.table_with("S1 item")[1][1][:2] == ["s1-01", "s2-01"]
    assert "Sampled estimand" in doc.text and "12 positions" in doc.text
    assert "The answer labels carry essentially all next-token mass" in doc.text


def test_two_figures_and_label_effect_table_with_both_mappings(
    report: tuple[str, Parsed], results: QQResults
) -> None:
    html, doc = report
    assert html.count("<svg") == 2
    table = doc.table_with("|Δq|")
    ab = [it for it in results.to_json()["items"] if it["stratum"] != "S3"]
    assert {cells[0] for _, cells in table[1:]} == {it["item"] for it in ab}
    for _, cells in table[1:]:
        it = next(i for i in ab if i["item"] == cells[0])
        assert cells[3] == f"{it['label_effect']['delta_q']:.3f}"
    # items with |Δq| > 0.3 are annotated in Figure 2 (text kept as SVG text)
    big = [it["item"] for it in ab if it["label_effect"]["delta_q"] > 0.3]
    assert big, "fixture should produce a visible label effect"
    start = html.rindex("<svg")
    fig2 = html[start : html.index("</svg>", start)]
    assert all(f">{name}<" in fig2 for name in big)


def test_single_mapping_gives_one_figure_and_a_note() -> None:
    html, doc = _render(make_results(ab_mappings=("map1",), sampled=False))
    assert html.count("<svg") == 1
    assert "only one label mapping was measured" in doc.text
    assert not any(t and "|Δq|" in t[0][1] for t in doc.tables)
    assert "Sampled estimand" not in doc.text


def test_malicious_item_id_is_escaped_everywhere(results: QQResults) -> None:
    bad = '<script>alert("x")</script>'
    r = results.to_json()
    it = next(i for i in r["items"] if i["item"] == "s1-02")
    it["item"] = bad
    m1, m2 = it["mappings"]
    m1["q"], m2["q"] = -0.6, 0.7  # far off the diagonal: annotated in Figure 2 too
    r["gates"]["G3"]["checks"][0]["item"] = bad
    html, doc = _render(QQResults.from_json(r))
    assert "<script" not in html.lower()
    assert html.count("&lt;script&gt;") >= 4  # verdict table, label-effect table, G3 table, figure
    start = html.rindex("<svg")
    assert "&lt;script&gt;alert" in html[start : html.index("</svg>", start)]  # the Figure 2 annotation
    assert doc.errors == [] and html.count("<svg") == 2
    assert bad in [cells[0] for _, cells in doc.table_with("QQ verdict")[1:]]


def test_renders_without_plan_audit_or_optional_sections(results: QQResults) -> None:
    gates = Gates(G1Gate("NOT_RUN", 0), results.mass.gate(), G3Gate("NOT_RUN", ()))
    r = dataclasses.replace(results, gates=gates, source=None, memorization=None, fits=(), sampled=())
    html, doc = _render(r, plan=None, audit={})
    assert doc.errors == [] and doc.stack == []
    header = dict(cells for _, cells in doc.table_with("Study"))
    assert header["Model"] == "not recorded" and header["Plan digest"] == "not recorded"
    assert header["Measurements SHA-256"] == "not recorded" and header["Estimand"] == "logprob"
    assert 'class="badge notrun">G1 NOT_RUN<' in html and 'class="badge notrun">G3 NOT_RUN<' in html
    assert 'class="badge pass">G2 PASS<' in html  # falls back to results["mass"]
    assert "MLflow run not recorded" in doc.text and "Not configured" in doc.text
    assert html.count("<svg") == 2 and set(ITEMS) <= set(doc.text.split())


def test_base_model_mass_elsewhere_is_stated_plainly() -> None:
    r = make_results({"agent": "projective", "seed": 1, "other_mass": 0.8}, sampled=False)
    plan = copy.deepcopy(PLAN)
    plan["config"]["model"]["base_model"] = True
    html, doc = _render(r, plan=plan)
    # said once, in the answer; the G2 section adds the configuration
    assert (
        "and at most positions most of it is (median 0.8: typical of a base model, or of a prompt that "
        "does not elicit a label), so the envelopes are too wide to decide anything" in doc.text
    )
    assert "most of its next-token probability on tokens other than the answer labels" not in doc.text
    assert "configured as a base model" in doc.text
    assert 'class="badge fail">G2 FAIL<' in html
    g2 = dict(cells for _, cells in doc.table_with("max other mass"))
    others = [
        p["other"]
        for it in r.to_json()["items"]
        for m in it["mappings"]
        for c in m["cells"]
        for p in c["positions"]
    ]
    share = sum(o > 0.5 for o in others) / len(others)  # sim positions only: hand-made ones have little
    assert g2["median other mass"] == "0.8" and g2["positions with other mass > 0.5"] == f"{100 * share:.1f}%"
