"""What MLflow shows of a run: a name that leads with what varies between runs of a study,
only the params that apply to the run's design, and nested config as readable keys. Real
SQLite stores under tmp_path, no mocks."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from lmaudit.pipeline import run, run_name
from lmaudit.tracking.mlflow_log import flatten

SIM = ("model=sim_projective", "items=sim_demo")


def _logged(tmp_path: Path) -> dict[str, dict[str, str]]:
    """``{run name: {param: value}}`` of every run in the store under tmp_path."""
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    try:
        runs = con.execute("select run_uuid, name from runs").fetchall()
        return {
            name: dict(con.execute("select key, value from params where run_uuid = ?", (uuid,)).fetchall())
            for uuid, name in runs
        }
    finally:
        con.close()


def test_a_log_prob_run_logs_no_sampling_params_and_few_shot_as_readable_keys(make_cfg, tmp_path) -> None:
    cfg = make_cfg(*SIM, name="logprob")
    run(cfg)
    (params,) = _logged(tmp_path).values()
    assert params["estimand.kind"] == "logprob"
    for key in ("estimand.n", "estimand.temperature", "estimand.top_p", "estimand.seed"):
        assert key not in params, key
    # the few-shot turns item by item, each field under its own key, never one blob
    assert "framing.few_shot" not in params
    few_shot = json.loads((tmp_path / "logprob" / "plan.json").read_text())["config"]["framing"]["few_shot"]
    assert len(few_shot) >= 2
    for i, turn in enumerate(few_shot):
        assert params[f"framing.few_shot.{i}.question"] == turn["question"]
        assert params[f"framing.few_shot.{i}.answer"] == str(turn["answer"])
    # the plan itself keeps every field (its digest is the registered design's)
    plan = json.loads((tmp_path / "logprob" / "plan.json").read_text())["config"]
    assert plan["estimand"]["n"] == 200 and "temperature" in plan["estimand"]


def test_a_sampled_run_logs_its_sampling_params(make_cfg, tmp_path) -> None:
    run(make_cfg(*SIM, "estimand=sampled", "estimand.n=20", "study.gates.g3.enabled=false", name="sampled"))
    (params,) = _logged(tmp_path).values()
    assert (params["estimand.kind"], params["estimand.n"], params["estimand.temperature"]) == (
        "sampled",
        "20",
        "1.0",
    )
    assert "estimand.seed" in params and "estimand.top_p" in params
    # gate G3 off: its settings do not apply
    assert params["study.gates.g3.enabled"] == "False"
    assert not [k for k in params if k.startswith("study.gates.g3.") and k != "study.gates.g3.enabled"]


def test_flatten_spells_lists_of_mappings_item_by_item() -> None:
    nested = {"a": {"b": [{"c": 1, "d": [{"e": 2}]}, {"c": 3, "d": []}], "names": ["x", "y"], "none": []}}
    assert flatten(nested) == {
        "a.b.0.c": 1,
        "a.b.0.d.0.e": 2,
        "a.b.1.c": 3,
        "a.b.1.d": [],
        "a.names": ["x", "y"],
        "a.none": [],
    }


def test_run_names_lead_with_the_design_and_end_with_the_model(make_cfg, tmp_path) -> None:
    names = {
        framing: run_name(make_cfg("model=sim_projective", f"framing={framing}", "out_dir=null"))
        for framing in ("track_m_fewshot", "track_p")
    }
    assert names == {
        "track_m_fewshot": "track_m_fewshot-counterbalanced-logprob-sim-projective",
        "track_p": "track_p-counterbalanced-logprob-sim-projective",
    }
    # the same design, the same name; another model, the same design words first
    again = run_name(make_cfg("model=sim_projective", "framing=track_p", "out_dir=null"))
    other = run_name(make_cfg("model=sim_mixture", "framing=track_p", "out_dir=null"))
    assert again == names["track_p"] and other == "track_p-counterbalanced-logprob-sim-mixture"
    judge = run_name(make_cfg("study=judge", "model=sim_judge", "out_dir=null"))
    assert judge.endswith("-sim-judge") and not judge.startswith("sim-judge"), judge
    draws = run_name(make_cfg("study=draws", "model=sim_persistent", "out_dir=null"))
    assert draws == "n20-t0.7-r3-first_word-sim-persistent"


def test_mlflow_tells_two_runs_of_one_model_apart_by_their_first_words(make_cfg, tmp_path) -> None:
    for framing in ("track_m_fewshot", "track_p"):
        run(make_cfg(*SIM, f"framing={framing}", "out_dir=null"))
    names = sorted(_logged(tmp_path))
    assert names == [
        "track_m_fewshot-counterbalanced-logprob-sim-projective",
        "track_p-counterbalanced-logprob-sim-projective",
    ]
    assert len({n[:8] for n in names}) == 2  # a list that shows 8 characters still tells them apart
