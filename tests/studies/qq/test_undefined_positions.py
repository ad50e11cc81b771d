"""A position with no probability on either label (``p_y = p_n = 0``, ``other = 1``: a label
absent from a server's top alternatives, or no sampled draw on either label) is a valid record
whose ``P(y | y or n)`` is undefined: its item is left out of the verdicts, listed and counted,
gate G2 fails (other mass 1 at that position), and every other item is analysed exactly as
without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lmaudit.pipeline import run
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.estimation import QQParams, analyze
from lmaudit.studies.qq.records import Measurement
from lmaudit.studies.qq.results import UndefinedPosition
from lmaudit.studies.registry import get_study
from qq_sim_run import run_two_sim_items
from stub_server import stub_model_args

QUESTION = {("AB", 1): "A", ("AB", 2): "B", ("BA", 1): "B", ("BA", 2): "A"}
MAP1 = {"y": "A", "n": "B"}
P_Y = [0.7, 0.2, 0.6, 0.4, 0.5, 0.3]
P_N = [0.3, 0.8, 0.4, 0.6, 0.5, 0.7]


def six(item: str, p_y: list[float], p_n: list[float], other: list[float]) -> list[Measurement]:
    return [
        Measurement(item, "S1", "map1", order, pos, QUESTION[(order, pos)], first, MAP1, {"A": y, "B": n}, o)
        for (order, pos, first), y, n, o in zip(env.POSITIONS, p_y, p_n, other, strict=True)
    ]


def sampled_six(item: str, counts: list[tuple[int, int, int]]) -> list[Measurement]:
    """Sampled records: ``(k_y, k_n, k_other)`` per position, ``n_draws`` their sum."""
    out = []
    for (order, pos, first), (k_y, k_n, k_o) in zip(env.POSITIONS, counts, strict=True):
        n = k_y + k_n + k_o
        out.append(
            Measurement(
                item, "S1", "map1", order, pos, QUESTION[(order, pos)], first, MAP1,
                {"A": k_y / n, "B": k_n / n}, k_o / n,
                estimand="sampled", n_draws=n, counts={"A": k_y, "B": k_n, "other": k_o},
            )
        )  # fmt: skip
    return out


def test_an_item_with_an_undefined_position_is_excluded_and_the_others_analysed() -> None:
    good = six("a", P_Y, P_N, [0.0] * 6)
    # position 2 after A = y (index 1): no probability on either label
    bad = six("b", [P_Y[0], 0.0, *P_Y[2:]], [P_N[0], 0.0, *P_N[2:]], [0.0, 1.0, 0, 0, 0, 0])
    res = analyze([*good, *bad])
    alone = analyze(good)  # the same item analysed without the other one
    assert res.items == alone.items and res.fits == alone.fits
    (x,) = res.excluded
    assert (x.item, x.stratum, x.undefined, x.max_other) == (
        "b",
        "S1",
        (UndefinedPosition("map1", "AB", 2, "y"),),
        1.0,
    )
    assert res.max_other == 1.0 and not res.g2_pass  # gate G2 sees the unassigned mass
    doc = res.to_json()
    assert doc["n_items"] == 1 and doc["counts"]["excluded"] == 1
    assert doc["excluded"][0]["undefined"] == [
        {"mapping": "map1", "order": "AB", "position": 2, "first_answer": "y"}
    ]
    assert doc["mass"]["max_other"] == 1.0 and doc["mass"]["g2_pass"] is False
    assert "excluded" not in alone.to_json() and "excluded" not in alone.to_json()["counts"]


def test_no_sampled_draw_on_either_label_excludes_the_item() -> None:
    counts = [(14, 6, 0), (4, 16, 0), (12, 8, 0), (8, 12, 0), (10, 10, 0), (6, 14, 0)]
    good = sampled_six("a", counts)
    bad = sampled_six("b", [*counts[:4], (0, 0, 20), counts[5]])  # position 2 of BA after y
    params = QQParams(estimand="sampled")
    res = analyze([*good, *bad], params)
    assert res.items == analyze(good, params).items
    (x,) = res.excluded
    assert x.undefined == (UndefinedPosition("map1", "BA", 2, "y"),) and x.max_other == 1.0
    assert not res.g2_pass
    # its per-position interval is the whole of [0, 1]: no draw on a label says nothing
    iv = next(s for s in res.sampled if (s.item, s.order, s.position, s.first_answer) == ("b", "BA", 2, "y"))
    assert (iv.low, iv.high) == (0.0, 1.0)


def test_every_item_undefined_is_refused_in_one_line() -> None:
    bad = six("b", [0.0, *P_Y[1:]], [0.0, *P_N[1:]], [1.0, 0, 0, 0, 0, 0])
    with pytest.raises(
        ValueError, match=r"^no item can be analysed: .* item 'b', mapping 'map1', order 'AB'"
    ):
        analyze(bad)


# --- through the pipeline: results, report, gates -------------------------------------------------


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A measurement file of the projective sim agent: two items, both mappings, gate G3 run."""
    return run_two_sim_items(tmp_path_factory.mktemp("qq"))


def _zeroed(row: dict[str, Any]) -> bool:
    """The first position record of s1-01 at position 2: no probability on either label."""
    if row.get("kind", "position") != "position" or row["item"] != "s1-01" or row["position"] != 2:
        return False
    row["probs"] = {label: 0.0 for label in row["probs"]}
    row["other"] = 1.0
    row["top_k"] = [["Maybe", 1.0]]
    return True


def test_the_run_analyses_every_other_item_and_fails_g2(
    measured: Path, make_cfg: Any, tmp_path: Path
) -> None:
    rows = [json.loads(x) for x in (measured / "measurements.jsonl").read_text().splitlines()]
    hit = next(r for r in rows if _zeroed(r))
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run(make_cfg("stage=analyze", f"measurements={path}", "items.ids=[s1-01,s3-01]", "mlflow.enabled=false"))
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    before = json.loads((measured / "results.json").read_text())
    assert [it["item"] for it in res["items"]] == ["s3-01"]
    assert res["items"][0] == next(it for it in before["items"] if it["item"] == "s3-01")
    (x,) = res["excluded"]
    assert x["item"] == "s1-01" and x["undefined"] == [
        {k: hit[k] for k in ("mapping", "order", "position", "first_answer")}
    ]
    assert res["counts"]["excluded"] == 1 and res["n_items"] == 1
    assert res["gates"]["G2"]["status"] == "FAIL" and res["gates"]["G2"]["max_other"] == 1.0
    # the G3 spot check of that cell has no log-prob joint to compare with: failed, with why
    g3 = [c for c in res["gates"]["G3"]["checks"] if (c["item"], c["mapping"], c["order"]) == (
        hit["item"], hit["mapping"], hit["order"])]  # fmt: skip
    assert g3 and all(not c["passed"] and "undefined" in c for c in g3)
    assert res["gates"]["G3"]["status"] == "FAIL"
    html = (tmp_path / "run" / "report.html").read_text()
    assert "Excluded: 1 item (s1-01) with no probability on either label" in html
    metrics = get_study("qq").result(json.loads((tmp_path / "run" / "results.json").read_text())).metrics
    assert metrics["n_excluded"] == 1


def test_a_server_without_the_labels_in_its_top_alternatives(
    openai_stub: Any, make_cfg: Any, tmp_path: Path
) -> None:
    """Measured from a server whose top alternatives hold neither label when s1-01's Clinton
    question follows its Gore question (order BA, position 2), with gate G3 on: the run
    measures, analyses s3-01, and fails G2 and G3."""
    state, url = openai_stub

    def second_clinton_answer(body: dict[str, Any]) -> bool:
        msgs = body["messages"]
        return "Bill Clinton" in msgs[-1]["content"] and any("Al Gore" in m["content"] for m in msgs[:-1])

    state.no_labels = second_clinton_answer
    run(
        make_cfg(
            *stub_model_args(url),
            "study.items.ids=[s1-01,s3-01]",
            "study.gates.g3.n=20",
            "study.gates.g3.retry_n=40",
            "mlflow.enabled=false",
        )
    )
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [it["item"] for it in res["items"]] == ["s3-01"]
    (x,) = res["excluded"]
    assert x["item"] == "s1-01" and x["max_other"] == pytest.approx(1.0) and x["undefined"]
    assert all(u["position"] == 2 and u["order"] == "BA" for u in x["undefined"])
    assert res["gates"]["G2"]["status"] == "FAIL" and res["gates"]["G3"]["status"] == "FAIL"
    assert any("undefined" in c for c in res["gates"]["G3"]["checks"])
    assert (tmp_path / "run" / "report.html").exists()
