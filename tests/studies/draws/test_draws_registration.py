"""The seed's predictions P1-P4 as a frozen, data-open registration (conf/prereg/draws_seed.yaml,
prereg/draws/draws_seed.json), scored by the platform's pre-registration machinery: compound
claims, censored bounds, and the whole pipeline on imported draws of the seed's families."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from draws_helpers import family
from omegaconf import OmegaConf

from lmaudit.errors import PreregError
from lmaudit.pipeline import run
from lmaudit.prereg import (
    HELD,
    NOT_EVALUABLE,
    NOT_HELD,
    load_registration,
    parse_predictions,
)
from lmaudit.prereg import (
    score_predictions as score,
)
from lmaudit.provenance.digest import file_sha256

REPO = Path(__file__).resolve().parents[3]
SEED_FAMILIES = ("gpt-oss:120b", "qwen3.5:35b", "claude-opus-4-8")


def _fam(holm_p: float, rho_upper: float | None, status: str, drift_p: float) -> dict[str, Any]:
    interval = {"bounded": [rho_upper, rho_upper], "uninformative": [0.5, None], "below_grid": [None, 0.0]}[
        status
    ]
    label = {"bounded": f"{rho_upper}", "uninformative": "> 0.50", "below_grid": "< 0.00"}[status]
    return {
        "holm_p": holm_p,
        "rho_upper": rho_upper,
        "rho_upper_interval": interval,
        "rho_upper_label": label,
        "drift": {"p": drift_p},
    }


def _registered() -> list[Any]:
    raw = OmegaConf.to_container(OmegaConf.load(REPO / "conf/prereg/draws_seed.yaml").prereg.predictions)
    return parse_predictions(raw, "conf/prereg/draws_seed")


def test_seed_predictions_score_as_the_seed_reads_them() -> None:
    results = {
        "families": {
            "gpt-oss:120b": _fam(0.6, 0.04, "bounded", 0.3),  # P1 held
            "qwen3.5:35b": _fam(0.9, None, "uninformative", 0.2),  # P2: bound uninformative -> not held
            "claude-opus-4-8": _fam(0.01, 0.2, "bounded", 0.01),  # P3 rejects; P4 drift -> not held
        }
    }
    scored = {p["id"]: p for p in score(_registered(), results)}
    assert [scored[k]["outcome"] for k in ("P1", "P2", "P3", "P4")] == [HELD, NOT_HELD, NOT_HELD, NOT_HELD]
    p2 = scored["P2"]["checks"][1]
    assert p2["observed"] == "> 0.50" and p2["reason"] == "censored value"
    assert scored["P1"]["checks"][0]["observed"] == 0.6 and scored["P1"]["confidence"] == "moderate"


def test_absent_families_are_not_evaluable() -> None:
    scored = score(_registered(), {"families": {"sim-persistent": _fam(0.001, 0.3, "bounded", 0.5)}})
    assert {p["outcome"] for p in scored} == {NOT_EVALUABLE}
    assert "metric not in results" in scored[0]["reason"]


def test_a_failed_check_decides_even_when_another_is_not_evaluable() -> None:
    results = {"families": {"gpt-oss:120b": _fam(0.01, 0.05, "bounded", 0.5)}}  # P4 lacks two families
    scored = {p["id"]: p for p in score(_registered(), results)}
    assert scored["P1"]["outcome"] == NOT_HELD
    assert scored["P4"]["outcome"] == NOT_EVALUABLE
    results["families"]["gpt-oss:120b"]["drift"]["p"] = 0.01
    assert {p["id"]: p for p in score(_registered(), results)}["P4"]["outcome"] == NOT_HELD


@pytest.mark.parametrize(
    ("status", "op", "value", "outcome"),
    [
        ("uninformative", "<", 0.3, NOT_HELD),
        ("uninformative", "<", 0.9, NOT_EVALUABLE),
        ("uninformative", ">", 0.4, HELD),
        ("uninformative", "<=", 0.5, NOT_HELD),  # "> 0.50" excludes 0.50 itself
        ("uninformative", ">", 0.5, HELD),
        ("uninformative", ">=", 0.6, NOT_EVALUABLE),
        ("below_grid", ">=", 0.0, NOT_HELD),  # "< 0.00"
        ("below_grid", "<", 0.0, HELD),
        ("below_grid", "<", 0.1, HELD),
        ("below_grid", ">", 0.1, NOT_HELD),
        ("bounded", "<=", 0.2, HELD),
        ("bounded", ">", 0.2, NOT_HELD),
    ],
)
def test_censored_and_exact_values(status: str, op: str, value: float, outcome: str) -> None:
    results = {"families": {"f": _fam(0.5, 0.2 if status == "bounded" else None, status, 0.5)}}
    pred = parse_predictions(
        [{"id": "X", "all_of": [{"metric": "families.f.rho_upper", "op": op, "value": value}]}], "t"
    )
    assert score(pred, results)[0]["outcome"] == outcome


def test_the_shipped_registration_is_open_to_its_data_and_holds_the_seed_predictions() -> None:
    doc = load_registration(REPO / "prereg/draws/draws_seed.json")
    assert doc["data"] == "open" and doc["inputs"] == {} and "import_path" not in doc["config"]["study"]
    assert [p["id"] for p in doc["predictions"]] == ["P1", "P2", "P3", "P4"]
    assert [p.to_dict() for p in _registered()] == doc["predictions"]
    rules = doc["decision_rules"]
    assert (rules["permutations"], rules["sims_per_step"], rules["alpha"]) == (10_000, 500, 0.05)
    assert (rules["rho_min"], rules["rho_max"], rules["rho_step"]) == (0.0, 0.5, 0.01)
    assert rules["exclude_patterns"] == ["pred-*", "claim-*"]


def _seed_like_import(path: Path, seed: int) -> Path:
    """Draws of the seed's three families: gpt-oss independent (many sequences), qwen strongly
    persistent, claude a few one-answer sequences (uninformative), plus an excluded condition."""
    rng = np.random.default_rng(seed)
    plans = {"gpt-oss:120b": (150, 0.0), "qwen3.5:35b": (60, 0.6)}
    lines = []
    for fam, (n_seq, rho) in plans.items():
        for i, seq in enumerate(family(rng, n_seq, 20, rho)):
            lines.append(
                {
                    "family": fam,
                    "source": "exp-1",
                    "condition": "base",
                    "probe": f"p{i:03d}",
                    "draws": [f"a{x}" for x in seq],
                }
            )
    for i in range(3):
        lines.append(
            {
                "family": "claude-opus-4-8",
                "source": "exp-1",
                "condition": "base",
                "probe": f"p{i:03d}",
                "draws": ["same"] * 12,
            }
        )
    lines.append(
        {
            "family": "gpt-oss:120b",
            "source": "exp-1",
            "condition": "pred-x",
            "probe": "p000",
            "draws": ["a", "a", "a"],
        }
    )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_the_registration_scores_imported_draws_of_the_seed_families(make_cfg, tmp_path) -> None:
    data = _seed_like_import(tmp_path / "draws.jsonl", 4)
    run(
        make_cfg(
            "prereg=draws_seed",
            f"study.import_path={data}",
            f"paths.prereg={REPO / 'prereg'}",
            "mlflow.enabled=true",
            name="scored",
        )
    )
    res = json.loads((tmp_path / "scored/results.json").read_text())
    fams = res["families"]
    assert set(fams) == set(SEED_FAMILIES) and res["data"]["excluded"]["n"] == 1
    out = {p["id"]: p["outcome"] for p in res["predictions"]}
    # the planted truths, read off the registered analysis's own numbers
    assert not fams["gpt-oss:120b"]["reject"] and fams["gpt-oss:120b"]["rho_upper"] < 0.10
    assert out["P1"] == HELD
    assert fams["qwen3.5:35b"]["reject"] and out["P2"] == NOT_HELD
    assert fams["claude-opus-4-8"]["rho_upper_label"] == "> 0.50" and out["P3"] == NOT_HELD
    drift_ok = all(fams[f]["drift"]["p"] >= 0.05 for f in SEED_FAMILIES)
    assert out["P4"] == (HELD if drift_ok else NOT_HELD)
    # the registration binds the analysis; the data scored are recorded by digest
    assert res["prereg"]["name"] == "draws_seed" and res["prereg"]["data"] == "open"
    assert res["prereg"]["data_scored"]["plan_inputs"]["import"]["sha256"] == file_sha256(data)
    db = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    tags = dict(db.execute("select key, value from tags"))
    assert {tags[f"prediction.{k}"] for k in out} <= {HELD, NOT_HELD} and tags["prediction.P2"] == NOT_HELD
    artifacts = list((tmp_path / "mlruns").rglob("draws_seed.json"))
    assert artifacts, "the frozen registration is logged with the run"
    html = (tmp_path / "scored/report.html").read_text()
    assert "families.qwen3.5:35b.holm_p" in html and "censored value" in html


def test_the_open_registration_still_binds_the_analysis(make_cfg, tmp_path) -> None:
    data = _seed_like_import(tmp_path / "draws.jsonl", 5)
    with pytest.raises(PreregError, match=r"config\.study\.permutations"):
        run(
            make_cfg(
                "prereg=draws_seed",
                f"study.import_path={data}",
                "study.permutations=999",
                f"paths.prereg={REPO / 'prereg'}",
                "mlflow.enabled=false",
                name="changed",
            )
        )
    assert not (tmp_path / "changed").exists()


def test_freezing_the_open_registration_needs_no_data_and_reproduces_the_shipped_plan(
    make_cfg, tmp_path
) -> None:
    run(
        make_cfg(
            "prereg=draws_seed",
            "stage=freeze",
            f"paths.prereg={tmp_path / 'prereg'}",
            "study.import_path=/nonexistent/seed.jsonl",
        )
    )
    fresh = load_registration(tmp_path / "prereg/draws/draws_seed.json")
    shipped = load_registration(REPO / "prereg/draws/draws_seed.json")
    assert fresh["plan_digest"] == shipped["plan_digest"] and fresh["predictions"] == shipped["predictions"]
    # a bound registration of the same study still needs its data at freeze time
    with pytest.raises(Exception, match="file not found"):
        run(make_cfg("study=draws", "study.import_path=/nonexistent/seed.jsonl", "stage=plan", name="p"))
