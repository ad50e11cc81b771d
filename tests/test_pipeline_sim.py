"""The whole pipeline (Hydra config -> plan -> measure -> analyze -> report -> MLflow) on the
``sim`` ground-truth agents: each must give the verdicts its theory predicts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.pipeline import run

RUN_FILES = ("plan.json", "measurements.jsonl", "results.json", "audit_record.json", "report.html")


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("model", ["sim_projective", "sim_repetition", "sim_luders_sym"])
def test_qq_satisfying_agents_are_satisfied_everywhere(make_cfg, tmp_path, model):
    cfg = make_cfg(f"model={model}", "mlflow.enabled=false", name=model)
    run(cfg)
    out = tmp_path / model
    for f in RUN_FILES:
        assert (out / f).stat().st_size > 0, f
    res = _results(out)
    assert res["n_items"] == 18
    assert res["counts"]["verdict"]["SATISFIED"] == 18
    assert res["counts"]["gamma_class"]["NONCONTEXTUAL"] == 18
    for it in res["items"]:
        assert abs(it["q"]) < 1e-12, it["item"]
    # gates: labels are single pieces, no leaked mass, sampling agrees with log-probs
    assert {g: v["status"] for g, v in res["gates"].items()} == {"G1": "PASS", "G2": "PASS", "G3": "PASS"}


def test_repetition_agent_shows_order_effects_without_violation(make_cfg, tmp_path):
    run(make_cfg("model=sim_repetition", "model.params.r=0.6", "mlflow.enabled=false", name="rep"))
    res = _results(tmp_path / "rep")
    # Prop. 4: OE_B = r (u - v) exactly, and not all zero
    oe_b = [(it["oe_b"], 0.6 * (it["u"] - it["v"])) for it in res["items"]]
    assert max(abs(a - b) for a, b in oe_b) < 1e-12
    assert max(abs(a) for a, _ in oe_b) > 0.05


def test_mixture_repetition_recovers_closed_form_and_family(make_cfg, tmp_path):
    # position-invariant retention r[y]=0.8, r[n]=0.2: q = (r[n] - r[y]) (u - v) (Prop. 5)
    run(make_cfg("model=sim_mixture", "mlflow.enabled=false", name="mix"))
    res = _results(tmp_path / "mix")
    violated = 0
    for it in res["items"]:
        expected = (0.2 - 0.8) * (it["u"] - it["v"])
        assert it["q"] == pytest.approx(expected, abs=1e-12), it["item"]
        want = "VIOLATED" if abs(expected) > 0.02 + 1e-9 else "SATISFIED"
        assert it["verdict"] == want, it["item"]
        violated += want == "VIOLATED"
    assert violated >= 5
    fits = {(f["family"], f["stratum"]): f for f in res["fits"]}
    polarity = [f for (fam, _), f in fits.items() if fam.startswith("polarity")]
    position = [f for (fam, _), f in fits.items() if fam.startswith("position")]
    assert polarity and all(
        abs(f["k"] - (0.2 - 0.8)) < 1e-9 and f["decision"] != "rejected" for f in polarity
    )
    assert any(f["decision"] == "rejected" for f in position)


def test_asymmetric_luders_violates_somewhere(make_cfg, tmp_path):
    run(make_cfg("model=sim_luders_asym", "mlflow.enabled=false", name="lasym"))
    res = _results(tmp_path / "lasym")
    assert res["counts"]["verdict"]["VIOLATED"] >= 1
    assert res["gates"]["G2"]["status"] == "PASS"


def test_reanalysis_reproduces_results_exactly(make_cfg, tmp_path):
    run(make_cfg("model=sim_mixture", "mlflow.enabled=false", name="first"))
    first = tmp_path / "first"
    run(
        make_cfg(
            "stage=analyze",
            f"measurements={first / 'measurements.jsonl'}",
            "mlflow.enabled=false",
            name="again",
        )
    )
    assert (tmp_path / "again" / "results.json").read_bytes() == (first / "results.json").read_bytes()
    assert (tmp_path / "again" / "report.html").exists()


def test_stages_one_at_a_time_equal_stage_all(make_cfg, tmp_path):
    run(make_cfg("model=sim_projective", "mlflow.enabled=false", name="all"))
    for stage in ("plan", "measure", "analyze", "report"):
        run(make_cfg("model=sim_projective", "mlflow.enabled=false", f"stage={stage}", name="staged"))
    for f in ("plan.json", "measurements.jsonl", "results.json"):
        assert (tmp_path / "staged" / f).read_bytes() == (tmp_path / "all" / f).read_bytes(), f
    audit = json.loads((tmp_path / "staged" / "audit_record.json").read_text())
    assert {"plan", "measure", "analyze", "report"} <= set(audit)
    # the second, cached, measurement asked the backend nothing, so no time is counted against it
    assert audit["measure"]["cache"]["misses"] == 0
    assert audit["measure"]["seconds"]["label_logprobs"] == audit["measure"]["seconds"]["sample"] == 0.0
    cold = json.loads((tmp_path / "all" / "audit_record.json").read_text())["measure"]["seconds"]
    assert cold["label_logprobs"] > 0.0 and cold["sample"] > 0.0  # scoring, and gate G3's draws
    assert cold["total"] + 0.002 >= cold["load"] + cold["label_logprobs"] + cold["sample"]  # (rounded to ms)


def test_mlflow_run_is_recorded_in_sqlite_store(make_cfg, tmp_path):
    run(make_cfg("model=sim_projective", name="ml"))
    db = tmp_path / "mlruns" / "mlflow.db"
    assert db.exists()
    con = sqlite3.connect(db)
    tags = dict(con.execute("select key, value from tags").fetchall())
    metrics = dict(con.execute("select key, value from metrics").fetchall())
    assert tags["gate.G1"] == "PASS" and tags["gate.G3"] == "PASS"
    assert metrics["n_satisfied"] == 18.0
    artifacts = {p.name for p in (tmp_path / "mlruns" / "artifacts").rglob("*") if p.is_file()}
    assert {"results.json", "audit_record.json", "report.html", "plan.json"} <= artifacts


def test_replanning_a_run_dir_drops_stale_results(make_cfg, tmp_path):
    run(make_cfg("model=sim_projective", "mlflow.enabled=false", "items=sim_demo", name="d"))
    out = tmp_path / "d"
    old_plan = json.loads((out / "plan.json").read_text())
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    other = (
        "model=sim_projective",
        "mlflow.enabled=false",
        "items=sim_demo",
        "stage=measure",
        "study.epsilon=0.05",
    )
    with pytest.raises(InputError, match=r"differs in: study\.epsilon.*overwrite=true"):
        run(make_cfg(*other, name="d"))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # nothing touched
    run(make_cfg(*other, "overwrite=true", name="d"))
    new_plan = json.loads((out / "plan.json").read_text())
    assert new_plan["plan_digest"] != old_plan["plan_digest"]
    assert new_plan["config"]["study"]["epsilon"] == 0.05
    # results of the old plan are gone until the new plan is analysed
    assert not (out / "results.json").exists() and not (out / "report.html").exists()
    audit = json.loads((out / "audit_record.json").read_text())
    assert audit["plan_digest"] == new_plan["plan_digest"] and "analyze" not in audit


def test_unknown_item_is_refused_before_any_model_call(make_cfg, tmp_path):
    # a model that cannot load: the item error must come first
    cfg = make_cfg(
        "model=qwen3_4b",
        "model.model=/nonexistent/model",
        "items.ids=[s1-01,s9-99]",
        "mlflow.enabled=false",
        name="bad",
    )
    with pytest.raises(ValueError, match="s9-99"):
        run(cfg)
    assert not (tmp_path / "bad" / "measurements.jsonl").exists()


def test_malformed_bank_is_refused_with_file_item_and_field(make_cfg, tmp_path):
    bank = json.loads((Path(__file__).parents[1] / "data/qq/items/pilot.json").read_text())
    bank["items"][2]["options"] = ["Only", "Three", "Options"]
    bad = tmp_path / "bank.json"
    bad.write_text(json.dumps(bank))
    cfg = make_cfg("model=qwen3_4b", "model.model=/nonexistent/model", "mlflow.enabled=false", name="bad2")
    cfg.study["items"].path = str(bad)
    with pytest.raises(ValueError) as e:
        run(cfg)
    msg = str(e.value)
    assert str(bad) in msg and bank["items"][2]["id"] in msg and "options" in msg


def test_sampled_estimand_intervals_cover_the_agents_probabilities(make_cfg, tmp_path):
    """n draws per forced branch: the exact 95% interval of each position covers the agent's
    true P(y | y or n) (taken from the log-prob pathway of the same run) at >= 90% of positions."""
    run(
        make_cfg(
            "model=sim_mixture", "estimand=sampled", "estimand.n=200", "mlflow.enabled=false", name="smp"
        )
    )
    out = tmp_path / "smp"
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    sampled = [r for r in rows if r.get("kind") == "position" and r["estimand"] == "sampled"]
    logprob = {
        (r["item"], r["mapping"], r["order"], r["position"], r["first_answer"]): r
        for r in rows
        if r.get("kind") == "position" and r["estimand"] == "logprob"
    }
    assert len(sampled) == len(logprob) == 186
    assert all(r["n_draws"] == 200 and sum(r["counts"].values()) == 200 for r in sampled)
    res = _results(out)
    intervals = res["sampled"]
    assert len(intervals) == 186
    covered = 0
    for iv in intervals:
        key = (iv["item"], iv["mapping"], iv["order"], iv["position"], iv["first_answer"])
        lp = logprob[key]
        truth = lp["probs"][lp["label_of"]["y"]] / (
            lp["probs"][lp["label_of"]["y"]] + lp["probs"][lp["label_of"]["n"]]
        )
        covered += iv["low"] <= truth <= iv["high"]
    assert covered / len(intervals) >= 0.90
    # verdicts are taken on the sampled estimand: q is estimated with sampling noise
    assert res["params"]["estimand"] == "sampled"
    assert any(abs(it["q"] - (0.2 - 0.8) * (it["u"] - it["v"])) > 1e-6 for it in res["items"])


def test_bad_input_is_refused_before_the_run_directory_exists(make_cfg, tmp_path):
    bank = tmp_path / "bank.json"
    bank.write_text('{"bank": "b", "version": 1, "items": [{"id": "x"}]}')
    with pytest.raises(InputError, match=r"bank\.json"):
        run(make_cfg("model=sim_projective", f"items.path={bank}", name="refused"))
    assert not (tmp_path / "refused").exists()
