"""The sim judge's planted effects (wrapper attraction and aversion, position bias, noise,
shared-context carryover) are recovered by the analysis, against closed forms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judge_helpers import simple_rows

from lmaudit.backends.sim import build_sim_agent
from lmaudit.pipeline import run

CONDS = {
    "P0": (False, set()),
    "PA": (False, {"A"}),
    "PB": (False, {"B"}),
    "PAB": (False, {"A", "B"}),
    "SWAP": (True, set()),
}


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def _agent(**params) -> object:
    return build_sim_agent({"agent": "judge", "seed": 0, **params})


def _expected_label(agent, item: str, cid: str) -> str:
    """The deterministic (noise = 0) verdict, in the original orientation."""
    swap, wrap = CONDS[cid]
    p = agent.probabilities(item, swap=swap, wrap=wrap)
    w = max(p, key=p.get)
    return {"A": "B", "B": "A"}.get(w, w) if swap else w


def _seed_rules(p0: str, pa: str, pb: str, pab: str) -> str:
    # written out independently of the study's code, as the seed's analysis plan states them
    if pab != p0:
        return "COMMON_WRAPPER_OR_REPEAT_UNSTABLE"
    if (pa, pb) == ("A", "B"):
        return "WRAPPER_ATTRACTION_PATTERN"
    if (pa, pb) == ("B", "A"):
        return "WRAPPER_AVERSION_PATTERN"
    if p0 == pa == pb:
        return "CONTENT_STABLE"
    return "MIXED_OR_TIE"


@pytest.mark.parametrize(
    ("effect", "pattern"),
    [("wrapper_attraction", "WRAPPER_ATTRACTION_PATTERN"), ("wrapper_aversion", "WRAPPER_AVERSION_PATTERN")],
)
def test_deterministic_wrapper_effects_are_classified_exactly(judge_cfg, tmp_path, effect, pattern):
    params = {"noise": 0.0, "content_sd": 2.0, "tie_margin": 0.5, effect: 3.0}
    cfg = judge_cfg(*(f"model.params.{k}={v}" for k, v in params.items()), rows=simple_rows(30), name=effect)
    run(cfg)
    res = _results(tmp_path / effect)
    agent = _agent(**params)
    got = {it["item"]: it for it in res["items"]}
    n_pattern = 0
    for item, it in got.items():
        want = {cid: _expected_label(agent, item, cid) for cid in CONDS}
        assert {cid: labs[0] for cid, labs in it["labels"].items()} == want, item
        cls = _seed_rules(want["P0"], want["PA"], want["PB"], want["PAB"])
        assert it["classification"] == [cls], item
        n_pattern += cls == pattern
        # the planted pattern appears exactly where the content preference is weaker than the wrapper
        if abs(agent.quality(item)) < 3.0 - 0.5 - 1e-9:
            assert cls == pattern, item
    assert n_pattern >= 5 and res["classification"]["counts"][pattern] == n_pattern
    # a common wrapper cancels: PAB never differs from P0
    pab = next(d for d in res["disagreement"] if d["condition"] == "PAB")
    assert pab["changed"] == 0
    pa = next(d for d in res["disagreement"] if d["condition"] == "PA")
    toward = "toward_A" if effect == "wrapper_attraction" else "toward_B"
    assert pa["sign_test"][toward] == pa["changed"] > 0


def test_position_bias_is_recovered_from_the_swap(judge_cfg, tmp_path):
    run(
        judge_cfg(
            "judge/condition=position",
            "model.params.noise=0.0",
            "model.params.position_bias=3.0",
            rows=simple_rows(40),
            name="pos",
        )
    )
    swap = _results(tmp_path / "pos")["disagreement"][0]
    agent = _agent(noise=0.0, position_bias=3.0)
    want = sum(
        _expected_label(agent, f"S{i:02d}", "SWAP") != _expected_label(agent, f"S{i:02d}", "P0")
        for i in range(40)
    )
    assert swap["comparison"] == "SWAP vs P0" and swap["changed"] == want >= 10
    # a bias toward the displayed A moves the original-orientation label toward B when swapped
    assert swap["sign_test"]["toward_A"] == 0 and swap["sign_test"]["p"] < 0.01
    run(judge_cfg("judge/condition=position", "model.params.noise=0.0", rows=simple_rows(40), name="nopos"))
    assert _results(tmp_path / "nopos")["disagreement"][0]["changed"] == 0


def test_noisy_flip_probabilities_cover_the_truth(judge_cfg, tmp_path):
    params = {"noise": 1.0, "wrapper_attraction": 1.5, "content_sd": 1.0, "tie_margin": 0.3}
    cfg = judge_cfg(
        "judge/condition=wrapper",
        "study.k=20",
        *(f"model.params.{k}={v}" for k, v in params.items()),
        rows=simple_rows(12),
        name="noisy",
    )
    run(cfg)
    res = _results(tmp_path / "noisy")
    agent = _agent(**params)
    items = [f"S{i:02d}" for i in range(12)]

    def probs(item, cid):
        swap, wrap = CONDS[cid]
        return agent.probabilities(item, swap=swap, wrap=wrap)

    dis = {d["comparison"]: d for d in res["disagreement"]}
    for cid in ("PA", "PB", "PAB"):
        truth = (
            sum(1 - sum(probs(i, "P0")[v] * probs(i, cid)[v] for v in ["A", "B", "TIE"]) for i in items) / 12
        )
        d = dis[f"{cid} vs P0"]
        assert d["n"] == 12 * 20
        assert d["ci"]["low"] <= truth <= d["ci"]["high"], (cid, truth, d["ci"])
    repeat = dis["P0 vs P0 (repeat)"]
    truth = sum(1 - sum(p * p for p in probs(i, "P0").values()) for i in items) / 12
    assert repeat["n"] == 12 * 10 and repeat["ci"]["low"] <= truth <= repeat["ci"]["high"]
    # attraction: PA moves verdicts toward A, PB toward B, well beyond the repeat baseline
    assert dis["PA vs P0"]["sign_test"]["toward_A"] > dis["PA vs P0"]["sign_test"]["toward_B"]
    assert dis["PA vs P0"]["sign_test"]["p"] < 1e-3 and dis["PB vs P0"]["sign_test"]["p"] < 1e-3
    assert dis["PAB vs P0"]["sign_test"]["p"] > 1e-3
    # the log-prob readout shows the shift in closed form
    shift = res["readout"]["PA"]["shift_vs_reference"]["mean"]["A"]
    want = sum(probs(i, "PA")["A"] - probs(i, "P0")["A"] for i in items) / 12
    assert shift == pytest.approx(want, abs=1e-12) and shift > 0.1


def test_shared_context_carryover_hides_the_effect_and_is_a_deviation(judge_cfg, tmp_path):
    base = (
        "judge/condition=wrapper",
        "model.params.noise=0.0",
        "model.params.wrapper_attraction=3.0",
        "model.params.carryover=1.0",
    )
    run(judge_cfg(*base, rows=simple_rows(10), name="fresh"))
    run(judge_cfg(*base, "study.isolation=shared", rows=simple_rows(10), name="shared"))
    fresh, shared = _results(tmp_path / "fresh"), _results(tmp_path / "shared")
    assert fresh["deviations"] == [] and fresh["design"]["isolation"] == "fresh"
    assert sum(d["changed"] for d in fresh["disagreement"]) > 0
    assert shared["design"]["isolation"] == "shared"
    assert [d["id"] for d in shared["deviations"]] == ["shared_context"]
    assert all(d["changed"] == 0 for d in shared["disagreement"])
    assert shared["classification"]["counts"]["CONTENT_STABLE"] == 10
    audit = json.loads((tmp_path / "shared/audit_record.json").read_text())
    assert audit["judge"]["isolation"] == "shared"
    assert "Deviation: shared_context" in (tmp_path / "shared/report.html").read_text()
    # later turns really saw the earlier conversation
    rows = [json.loads(x) for x in (tmp_path / "shared/measurements.jsonl").read_text().splitlines()]
    turns = [r["turn"] for r in rows if r["kind"] == "judgment"]
    assert turns == list(range(40))
