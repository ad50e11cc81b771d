"""Scoring the registered predictions: held, not held, not evaluable, and censored bounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from lmaudit.studies.draws.predictions import HELD, NOT_EVALUABLE, NOT_HELD, score_predictions

REPO = Path(__file__).resolve().parents[3]


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


def _registered() -> list[dict[str, Any]]:
    preds = OmegaConf.to_container(OmegaConf.load(REPO / "conf/study/draws.yaml").predictions, resolve=True)
    assert isinstance(preds, list)
    return preds  # type: ignore[return-value]


def test_seed_predictions_score_as_the_seed_reads_them() -> None:
    results = {
        "families": {
            "gpt-oss:120b": _fam(0.6, 0.04, "bounded", 0.3),  # P1 held
            "qwen3.5:35b": _fam(0.9, None, "uninformative", 0.2),  # P2: bound uninformative -> not held
            "claude-opus-4-8": _fam(
                0.01, 0.2, "bounded", 0.01
            ),  # P3: rejects -> not held; P4: drift -> not held
        }
    }
    scored = {p["id"]: p for p in score_predictions(_registered(), results)}
    assert [scored[k]["outcome"] for k in ("P1", "P2", "P3", "P4")] == [HELD, NOT_HELD, NOT_HELD, NOT_HELD]
    p2 = scored["P2"]["checks"][1]
    assert p2["observed"] == "> 0.50" and p2["reason"] == "censored value"
    assert scored["P1"]["checks"][0]["observed"] == 0.6


def test_absent_families_are_not_evaluable() -> None:
    scored = score_predictions(
        _registered(), {"families": {"sim-persistent": _fam(0.001, 0.3, "bounded", 0.5)}}
    )
    assert {p["outcome"] for p in scored} == {NOT_EVALUABLE}
    assert scored[0]["checks"][0]["reason"] == "metric not in results"


@pytest.mark.parametrize(
    ("status", "op", "value", "outcome"),
    [
        ("uninformative", "<", 0.3, NOT_HELD),
        ("uninformative", "<", 0.9, NOT_EVALUABLE),
        ("uninformative", ">", 0.4, HELD),
        ("below_grid", "<", 0.1, HELD),
        ("below_grid", ">", 0.1, NOT_HELD),
        ("bounded", "<=", 0.2, HELD),
        ("bounded", ">", 0.2, NOT_HELD),
    ],
)
def test_censored_and_exact_values(status: str, op: str, value: float, outcome: str) -> None:
    results = {"families": {"f": _fam(0.5, 0.2 if status == "bounded" else None, status, 0.5)}}
    pred = [{"id": "X", "all_of": [{"metric": "families.f.rho_upper", "op": op, "value": value}]}]
    assert score_predictions(pred, results)[0]["outcome"] == outcome
