"""The whole pipeline (Hydra config -> plan -> measure -> analyze -> report -> MLflow) for study=draws."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.pipeline import run

REPO = Path(__file__).resolve().parents[3]
RUN_FILES = ("plan.json", "measurements.jsonl", "results.json", "audit_record.json", "report.html")
SMALL = (
    "study.permutations=999",
    "study.sims_per_step=100",
    f"study.probes_path={REPO / 'data/draws/probes.jsonl'}",
)


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def test_sim_persistent_sampler_end_to_end(make_cfg, tmp_path) -> None:
    run(make_cfg("study=draws", "model=sim_persistent", "mlflow.enabled=false", *SMALL, name="sim"))
    out = tmp_path / "sim"
    for f in RUN_FILES:
        assert (out / f).stat().st_size > 0, f
    res = _results(out)
    assert res["mode"] == "sample" and res["n_families"] == 1
    fam = res["families"]["sim-persistent"]
    assert fam["n_sequences"] == 18 and fam["n_draws"] == 360 and fam["holm_p"] <= 0.01 and fam["reject"]
    assert 0.1 < fam["rho_hat"] < 0.45 and fam["rho_upper_status"] in ("bounded", "uninformative")
    assert sum(fam["null"]["count"]) == 999 and len(fam["rho_curve"]["rho"]) == 51
    assert "predictions" not in res  # predictions belong to a registration (prereg=draws_seed)
    rows = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    assert all(len(r["draws"]) == 20 and r["raw"] == r["draws"] for r in rows)  # sim answers are single words
    plan = json.loads((out / "plan.json").read_text())
    assert plan["n_requests"] == 18 and set(plan["config"]) == {"study", "model"}
    html = (out / "report.html").read_text()
    assert "<svg" in html and "sim-persistent" in html and "The persistence test, per family" in html
    assert (out / "metrics.json").exists() and (out / "plots" / "rho_curve.csv").exists()


def test_reanalysis_reproduces_results_exactly(make_cfg, tmp_path) -> None:
    run(make_cfg("study=draws", "model=sim_persistent", "mlflow.enabled=false", *SMALL, name="first"))
    first = tmp_path / "first"
    run(
        make_cfg(
            "study=draws",
            "model=sim_persistent",
            "mlflow.enabled=false",
            *SMALL,
            "stage=analyze",
            f"measurements={first / 'measurements.jsonl'}",
            name="again",
        )
    )
    assert (tmp_path / "again" / "results.json").read_bytes() == (first / "results.json").read_bytes()


def test_rho_zero_sampler_is_not_rejected(make_cfg, tmp_path) -> None:
    run(
        make_cfg(
            "study=draws",
            "model=sim_persistent",
            "model.params.rho=0.0",
            "study.replicates=10",
            "mlflow.enabled=false",
            *SMALL,
            name="iid",
        )
    )
    fam = _results(tmp_path / "iid")["families"]["sim-persistent"]
    assert not fam["reject"] and fam["rho_upper_status"] == "bounded" and fam["rho_upper"] < 0.3


def test_imported_jsonl_is_audited_end_to_end(make_cfg, tmp_path) -> None:
    run(
        make_cfg(
            "study=draws",
            "model=sim_persistent",
            f"study.import_path={REPO / 'data/draws/example_import.jsonl'}",
            "mlflow.enabled=true",
            *SMALL,
            name="imp",
        )
    )
    out = tmp_path / "imp"
    res = _results(out)
    assert res["mode"] == "import"
    assert res["data"]["excluded"] == {"n": 2, "by_pattern": {"pred-*": 1, "claim-*": 1}}
    assert res["data"]["deduplicated"]["n_dropped"] == 1
    a, b = res["families"]["model-a"], res["families"]["model-b"]
    assert a["flagged_sources"] == ["exp-2"] and a["without_flagged"]["n_sequences"] == 24
    assert a["reject"] and not a["without_flagged"]["reject"]  # the rebuilt source made it look persistent
    assert b["reject"] and b["flagged_sources"] == []
    assert {(s["family"], s["source"]) for s in res["sources"]} == {
        ("model-a", "exp-1"),
        ("model-a", "exp-2"),
        ("model-b", "exp-1"),
    }
    plan = json.loads((out / "plan.json").read_text())
    assert plan["mode"] == "import" and len(plan["inputs"]["import"]["sha256"]) == 64
    db = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    keys = {k for (k,) in db.execute("select key from metrics")}
    assert {"model-a.T", "model-b.holm_p", "n_rejected"} <= keys
    tags = dict(db.execute("select key, value from tags"))
    assert tags["flagged_sources"] == "model-a:exp-2" and "prediction.P1" not in tags  # no registration


def test_bad_import_file_is_refused_naming_line_and_field(make_cfg, tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"family": "m", "source": "s", "condition": "c", "probe": "p", "draws": ["a"]}\n'
        '{"family": "m", "source": "s", "condition": "c", "probe": "p", "draws": []}\n'
    )
    with pytest.raises(InputError, match=r"bad\.jsonl: line 2: field 'draws' is empty"):
        run(
            make_cfg(
                "study=draws",
                "model=sim_persistent",
                f"study.import_path={bad}",
                "mlflow.enabled=false",
                *SMALL,
                name="bad",
            )
        )


def test_an_import_file_can_be_analysed_directly(make_cfg, tmp_path) -> None:
    run(
        make_cfg(
            "study=draws",
            "stage=analyze",
            f"measurements={REPO / 'data/draws/example_import.jsonl'}",
            "mlflow.enabled=false",
            *SMALL,
            name="direct",
        )
    )
    res = _results(tmp_path / "direct")
    assert (
        res["mode"] == "import" and res["n_families"] == 2 and (tmp_path / "direct" / "report.html").exists()
    )


def test_plan_refuses_bad_settings(make_cfg) -> None:
    with pytest.raises(InputError, match=r"study\.normalise\.kind"):
        run(
            make_cfg(
                "study=draws",
                "model=sim_persistent",
                "study.normalise.kind=tokens",
                "stage=plan",
                "mlflow.enabled=false",
                *SMALL,
                name="x",
            )
        )
    with pytest.raises(InputError, match="rho_min < rho_max"):
        run(
            make_cfg(
                "study=draws",
                "model=sim_persistent",
                "study.rho_max=0.0",
                "stage=plan",
                "mlflow.enabled=false",
                *SMALL,
                name="y",
            )
        )


@pytest.mark.slow
def test_default_demo_runs_on_the_embedded_model(make_cfg, tmp_path) -> None:
    """``python run.py study=draws`` with tiny settings: 2 probes x 1 replicate x 5 draws."""
    run(
        make_cfg(
            "study=draws",
            "study.probe_ids=[color,planet]",
            "study.replicates=1",
            "study.n=5",
            "mlflow.enabled=false",
            *SMALL,
            name="embedded",
        )
    )
    res = _results(tmp_path / "embedded")
    fam = res["families"]["gemma3-270m"]
    assert fam["n_sequences"] == 2 and fam["n_draws"] == 10
    rows = [
        json.loads(line) for line in (tmp_path / "embedded" / "measurements.jsonl").read_text().splitlines()
    ]
    assert all(len(r["raw"]) == 5 and all(isinstance(t, str) for t in r["raw"]) for r in rows)
