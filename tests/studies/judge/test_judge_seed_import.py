"""The seed's recorded execution (appendices A and B), imported and re-analysed, reproduces its
Tables 2 and 3 exactly, classifies every prompt CONTENT_STABLE, and carries the deviation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.pipeline import run

SEED = Path(__file__).resolve().parents[2] / "data/judge/seed_001"

TABLE_2 = """\
| Comparison | Changed pairs | Rate |
|---|---|---|
| PA vs P0 | 0/20 | 0.0% |
| PB vs P0 | 0/20 | 0.0% |
| PAB vs P0 | 0/20 | 0.0% |"""

TABLE_3 = """\
| Condition | A | B | TIE | Mean confidence | Median confidence |
|---|---|---|---|---|---|
| P0 | 9 | 11 | 0 | 0.9205 | 0.9600 |
| PA | 9 | 11 | 0 | 0.9205 | 0.9600 |
| PB | 9 | 11 | 0 | 0.9205 | 0.9600 |
| PAB | 9 | 11 | 0 | 0.9205 | 0.9600 |"""

TABLE_A1_P0 = [
    "B",
    "A",
    "A",
    "B",
    "B",
    "B",
    "B",
    "B",
    "A",
    "A",
    "A",
    "B",
    "B",
    "A",
    "A",
    "B",
    "A",
    "A",
    "B",
    "B",
]


def table_2(res: dict) -> str:
    rows = ["| Comparison | Changed pairs | Rate |", "|---|---|---|"]
    for d in res["disagreement"]:
        rows.append(f"| {d['comparison']} | {d['changed']}/{d['n']} | {100 * d['rate']:.1f}% |")
    return "\n".join(rows)


def table_3(res: dict) -> str:
    rows = ["| Condition | A | B | TIE | Mean confidence | Median confidence |", "|---|---|---|---|---|---|"]
    for cid in res["conditions_analysed"]:
        c, conf = res["conditions"][cid]["counts"], res["conditions"][cid]["confidence"]
        rows.append(
            f"| {cid} | {c['A']} | {c['B']} | {c['TIE']} | {conf['mean']:.4f} | {conf['median']:.4f} |"
        )
    return "\n".join(rows)


@pytest.fixture
def seed_results(make_cfg, tmp_path) -> dict:
    cfg = make_cfg(
        "study=judge",
        "judge/condition=wrapper",
        f"study.import_dir={SEED}",
        "mlflow.enabled=false",
        name="seed",
    )
    run(cfg)
    return json.loads((tmp_path / "seed/results.json").read_text())


def test_tables_2_and_3_reproduce_exactly(seed_results):
    res = seed_results
    assert res["mode"] == "import" and res["n_prompts"] == 20 and res["k"] == 1
    assert table_2(res) == TABLE_2
    assert table_3(res) == TABLE_3
    assert all(d["changed_prompts"] == [] and d["excluded_invalid"] == 0 for d in res["disagreement"])


def test_appendix_a_classification_and_labels(seed_results):
    res = seed_results
    cls = res["classification"]
    assert cls["evaluable"] and cls["counts"]["CONTENT_STABLE"] == 20
    assert sum(cls["counts"].values()) == 20
    assert [it["item"] for it in res["items"]] == [f"P{i:03d}" for i in range(1, 21)]
    for it, want in zip(res["items"], TABLE_A1_P0, strict=True):
        assert it["labels"] == {c: [want] for c in ("P0", "PA", "PB", "PAB")}
        assert it["classification"] == ["CONTENT_STABLE"]
    # primary endpoints 4 and 5: every prompt's PA and PB verdicts are valid and decisive (no
    # TIE in Table A1) and equal P0's, so neither pattern occurs (the seed reports zero of each)
    pat = res["patterns"]
    assert (pat["n"], pat["n_both_decisive"]) == (20, sum(lab != "TIE" for lab in TABLE_A1_P0))
    assert (pat["attraction"]["count"], pat["aversion"]["count"]) == (0, 0)


def test_shared_context_is_recorded_as_a_deviation(seed_results, tmp_path):
    res = seed_results
    assert res["design"]["isolation"] == "shared"
    assert [d["id"] for d in res["deviations"]] == ["shared_context"]
    assert "one conversation" in res["deviations"][0]["description"]
    assert res["model_wins"] == {"evaluable": False, "reason": "no model mapping was given"}
    html = (tmp_path / "seed/report.html").read_text()
    assert "Deviation: shared_context" in html
    audit = json.loads((tmp_path / "seed/audit_record.json").read_text())
    assert (
        audit["judge"]["isolation"] == "shared" and audit["judge"]["deviations"][0]["id"] == "shared_context"
    )


def test_import_with_a_mapping_unblinds(make_cfg, tmp_path):
    folder = tmp_path / "imp"
    folder.mkdir()
    for f in SEED.glob("*.json"):
        (folder / f.name).write_bytes(f.read_bytes())
    mapping = {f"P{i:03d}": {"A": "m1", "B": "m2"} for i in range(1, 21)}
    (folder / "mapping.json").write_text(json.dumps(mapping))
    run(
        make_cfg(
            "study=judge",
            "judge/condition=wrapper",
            f"study.import_dir={folder}",
            "mlflow.enabled=false",
            name="unblind",
        )
    )
    res = json.loads((tmp_path / "unblind/results.json").read_text())
    mw = res["model_wins"]
    assert mw["by_condition"]["P0"] == {"wins": {"m1": 9, "m2": 11}, "TIE": 0}
    assert mw["ranking"]["PA"] == [["m2"], ["m1"]] and mw["ranking_changes"] is False


def test_bad_import_records_name_file_record_and_field(make_cfg, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "results_P0.json").write_text(
        json.dumps([{"prompt_id": "P1", "winner": "A", "confidence": 0.5}])
    )
    cfg = make_cfg(
        "study=judge", "judge/condition=wrapper", f"study.import_dir={folder}", "mlflow.enabled=false"
    )
    with pytest.raises(InputError, match=r"results_P0.json: record 0: missing field\(s\) \['reason'\]"):
        run(cfg)
    # a recorded label outside A/B/TIE is kept, marked invalid and counted, never coerced
    (folder / "results_P0.json").write_text(
        json.dumps(
            [
                {"prompt_id": "P1", "winner": "a", "confidence": 0.5, "reason": "r"},
                {"prompt_id": "P2", "winner": "B", "confidence": 2, "reason": "r"},
                {"prompt_id": "P3", "winner": "TIE", "confidence": None, "reason": None},
            ]
        )
    )
    cfg.overwrite = True  # the edited import is another input: the run directory is re-planned
    run(cfg)
    res = json.loads((tmp_path / "run/results.json").read_text())
    assert res["conditions"]["P0"]["counts"] == {"A": 0, "B": 0, "TIE": 1, "INVALID": 2}
    assert res["disagreement"] == []  # a single condition: descriptive only
