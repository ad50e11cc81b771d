"""``estimand=mixture`` through the pipeline on the sim agents: the config and the persona bank
are checked before any model call, personas enter the system prompt (so every persona is its own
cache key), every component is measured and analysed on its own, and the run is recorded like
any other (results, metrics, plots, report; re-analysis reproduces it byte for byte)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lmaudit.errors import ConfigRangeError, InputError
from lmaudit.pipeline import run
from lmaudit.prereg import parse_predictions, unknown_metrics
from lmaudit.studies.qq.analysis import results_template
from lmaudit.studies.qq.mixture.plan import load_personas
from lmaudit.studies.qq.planning import cells_for, mixture_cells
from lmaudit.studies.qq.planning import plan as qq_plan
from lmaudit.studies.qq.study import QQStudy
from lmaudit.studies.registry import get_study

REPO = Path(__file__).resolve().parents[3]
BANK = REPO / "data/qq/personas.jsonl"
IDS = "study.items.ids=[s1-01,s2-01,s3-01]"
MIX = ("estimand=mixture", f"study.estimand.mixture.personas_path={BANK}", "mlflow.enabled=false")


def _results(out: Path) -> dict[str, Any]:
    return json.loads((out / "results.json").read_text())


def test_a_mixture_run_on_sim_agents(make_cfg: Any, tmp_path: Path) -> None:
    run(
        make_cfg(
            "model=sim_projective", IDS, *MIX, "study.estimand.mixture.personas=[none,iowa-farmer]", name="m"
        )
    )
    out = tmp_path / "m"
    res = _results(out)
    mix = res["mixture"]
    assert mix["n_components"] == 6 and [c["id"] for c in mix["components"]][:3] == [
        "none/T0.5",
        "none/T1",
        "none/T2",
    ]
    assert all(abs(it["q"]) < 1e-12 for it in res["items"])  # a projective agent at any temperature: q = 0
    assert {g: v["status"] for g, v in res["gates"].items()} == {"G1": "PASS", "G2": "PASS", "G3": "PASS"}
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    positions = [r for r in rows if r["kind"] == "position"]
    plain = [r for r in positions if "persona" not in r]
    farmer = [r for r in positions if r.get("persona") == "iowa-farmer"]
    assert len(plain) == len(farmer) == 3 * 10  # 3 items: 2 A/B x 2 mappings x 2 orders + 1 Yes/No x 2 orders
    assert sum(r["kind"] == "g1" for r in rows) == 2 * 3 * 10  # G1 on every rendered context
    metrics = get_study("qq").result(json.loads((out / "results.json").read_text())).metrics
    assert (
        metrics["mixture.n_components"] == 6 and "mixture.component.iowa-farmer/T0.5.n_satisfied" in metrics
    )
    cdf = (out / "plots" / "mixture_distance_cdf.csv").read_text().splitlines()
    assert cdf[0] == "curve,d,cdf" and {ln.split(",")[0] for ln in cdf[1:]} == {
        "aggregate",
        "plain",
        "T0.5",
        "T1",
        "T2",
    }
    report = (out / "report.html").read_text()
    assert "Mixture: components beside the aggregate" in report and "iowa-farmer/T2" in report
    plan = json.loads((out / "plan.json").read_text())
    assert plan["n_requests"] == 3 * 20 and len(plan["mixture"]["cells"]) == 10
    assert plan["inputs"]["personas"]["sha256"] and len(plan["mixture"]["components"]) == 6
    # the same measurements analysed again give the same bytes
    run(make_cfg("model=sim_projective", IDS, *MIX, "study.estimand.mixture.personas=[none,iowa-farmer]",
                 "stage=analyze", f"measurements={out / 'measurements.jsonl'}", name="again"))  # fmt: skip
    assert (tmp_path / "again" / "results.json").read_bytes() == (out / "results.json").read_bytes()


def test_personas_enter_the_system_prompt_and_every_request(make_cfg: Any) -> None:
    cfg = make_cfg(
        "model=sim_projective", IDS, *MIX, "study.estimand.mixture.personas=[none,iowa-farmer,la-student]"
    )
    plain, extra = cells_for(cfg), mixture_cells(cfg)
    bank = load_personas(BANK)
    assert len(extra) == 2 * len(plain) and {c.persona for c in extra} == {"iowa-farmer", "la-student"}
    for cell in extra:
        twin = next(c for c in plain if c.key == cell.key)
        system = cell.requests[0].messages[0]["content"]
        persona = "\n\nAnswer as this respondent would: " + str(bank[str(cell.persona)].text)
        assert system == twin.requests[0].messages[0]["content"] + persona
        for a, b in zip(cell.requests, twin.requests, strict=True):
            assert a.messages[1:] == b.messages[1:]  # only the system prompt differs
    keys = {json.dumps(r.payload(False), sort_keys=True) for c in plain + extra for r in c.requests}
    assert len(keys) == 3 * len(plain + extra)  # every persona is its own cache key
    p = make_cfg(
        "model=sim_projective",
        *MIX,
        "framing=track_p",
        "study.estimand.mixture.personas=[none,texas-mechanic]",
    )
    for cell in mixture_cells(p):  # Track P's year framing composes with the persona
        text = cell.requests[0].messages[0]["content"]
        assert f"in {cell.item.reference_year} would" in text and text.endswith(
            str(bank["texas-mechanic"].text)
        )


def test_plain_runs_keep_their_plan(make_cfg: Any) -> None:
    cfg = make_cfg("model=sim_projective", IDS, "mlflow.enabled=false")
    assert "mixture" not in QQStudy().plan_config(cfg)["estimand"]
    doc = qq_plan(cfg).doc
    assert "mixture" not in doc and "personas" not in doc["inputs"] and mixture_cells(cfg) == []


@pytest.mark.parametrize(
    ("override", "error", "message"),
    [
        (
            "study.estimand.mixture.temperatures=[-1.0,1.0]",
            ConfigRangeError,
            r"study\.estimand\.mixture\.temperatures = \[-1\.0, 1\.0\]",
        ),
        (
            "study.estimand.mixture.temperature_weights=[0.5,0.4,0.2]",
            ConfigRangeError,
            r"study\.estimand\.mixture: temperature_weights sum to 1\.1",
        ),
        (
            "study.estimand.mixture.persona_weights=[1.0]",
            ConfigRangeError,
            r"persona_weights has 1 entries, personas has 11",
        ),
        (
            "study.estimand.mixture.personas=[none,nobody]",
            InputError,
            r"study\.estimand\.mixture\.personas: unknown persona id\(s\) \['nobody'\]",
        ),
        (
            "study.estimand.mixture.components=[{persona: none}]",
            ConfigRangeError,
            r"study\.estimand\.mixture: components\[0\]\.weight is required",
        ),
        (
            "study.estimand.mixture.components=[{persona: none, weight: 0.5, weight_ba: 0.5}]",
            ConfigRangeError,
            r"components\[\*\]\.weight sum to 0\.5",
        ),
    ],
)
def test_bad_mixtures_are_refused_naming_the_field_before_any_model_call(
    make_cfg: Any, tmp_path: Path, override: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        run(make_cfg("model=sim_projective", IDS, *MIX, override, name="bad"))
    assert not (tmp_path / "bad" / "measurements.jsonl").exists()


def test_order_dependent_weights_are_a_sim_check_only(make_cfg: Any) -> None:
    comps = "study.estimand.mixture.components=[{persona: none, weight: 1.0, weight_ba: 0.0}, {persona: iowa-farmer, weight: 0.0, weight_ba: 1.0}]"
    with pytest.raises(InputError, match=r"order-dependent weights .* sim agents only"):
        qq_plan(make_cfg("model=gemma3_270m", IDS, *MIX, comps))
    assert len(mixture_cells(make_cfg("model=sim_projective", IDS, *MIX, comps))) == 10


def test_a_sampled_mixture_samples_each_component_with_its_own_seeds(make_cfg: Any, tmp_path: Path) -> None:
    over = ("study.estimand.mixture.base=sampled", "study.estimand.mixture.personas=[none,iowa-farmer]",
            "study.estimand.mixture.temperatures=[1.0,2.0]", "study.estimand.n=40", "study.gates.g3.enabled=false")  # fmt: skip
    run(make_cfg("model=sim_repetition", IDS, *MIX, *over, name="s"))
    rows = [json.loads(x) for x in (tmp_path / "s" / "measurements.jsonl").read_text().splitlines()]
    sampled = [r for r in rows if r["kind"] == "position" and r["estimand"] == "sampled"]
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in sampled:
        groups.setdefault((r.get("persona"), r.get("temperature")), []).append(r)
    # the plain estimand (no persona, the estimand's temperature) and the three other components
    assert set(groups) == {(None, None), ("none", 2.0), ("iowa-farmer", 1.0), ("iowa-farmer", 2.0)}
    assert all(len(v) == 30 for v in groups.values())
    counts = {k: [json.dumps(r["counts"]) for r in v] for k, v in groups.items()}
    assert counts[(None, None)] != counts[("iowa-farmer", 1.0)]  # same answers, other draws
    res = _results(tmp_path / "s")
    assert res["mixture"]["base"] == "sampled" and res["mixture"]["n_components"] == 4
    assert all(it["verdict"] in ("SATISFIED", "INDETERMINATE", "VIOLATED") for it in res["items"])


def test_the_persona_bank(tmp_path: Path) -> None:
    bank = load_personas(BANK)
    assert "none" in bank and bank["none"].text is None and len(bank) >= 9
    axes = {k for p in bank.values() if p.axes for k in p.axes}
    assert {
        "age",
        "gender",
        "region",
        "urbanicity",
        "education",
        "race_ethnicity",
        "religion",
        "attendance",
        "party",
        "ideology",
    } <= axes
    people = [p for p in bank.values() if p.axes]
    assert {p.axes["gender"] for p in people} == {"man", "woman"}  # type: ignore[index]
    assert len({p.axes["region"] for p in people}) == 4 and len({p.axes["ideology"] for p in people}) >= 4  # type: ignore[index]
    bad = tmp_path / "p.jsonl"
    for body, message in [
        (
            '{"id": "x", "label": "x", "text": ""}\n',
            r"line 1: persona 'x': field 'text' must be a non-empty string",
        ),
        (
            '{"id": "none", "label": "n", "text": null}\n{"id": "none", "label": "n", "text": null}\n',
            r"line 2: field 'id' = 'none' is given twice",
        ),
        ('{"id": "a", "label": "a", "text": "t", "age": 3}\n', r"line 1: unknown field\(s\) \['age'\]"),
        ('{"id": "a", "label": "a", "text": "t"}\n', r"needs the unconditioned persona 'none'"),
    ]:
        bad.write_text(body)
        with pytest.raises(InputError, match=message):
            load_personas(bad)


def test_the_mixture_registration_names_real_metrics(make_cfg: Any) -> None:
    from omegaconf import OmegaConf

    cfg = make_cfg("prereg=qq_mixture_pilot", f"study.estimand.mixture.personas_path={BANK}")
    preds = parse_predictions(
        OmegaConf.to_container(cfg.prereg.predictions, resolve=True), "qq_mixture_pilot"
    )
    assert len(preds) >= 5
    assert (
        unknown_metrics(preds, results_template(cfg).to_json()) == []
    )  # a sim agent's results: no model call


def test_mlflow_records_the_component_level_diagnostics(make_cfg: Any, tmp_path: Path) -> None:
    import sqlite3

    over = ("model=sim_projective", IDS, "estimand=mixture", f"study.estimand.mixture.personas_path={BANK}")
    run(make_cfg(*over, "study.estimand.mixture.personas=[none,la-student]", name="ml"))
    con = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    metrics = dict(con.execute("select key, value from metrics").fetchall())
    tags = dict(con.execute("select key, value from tags").fetchall())
    assert metrics["mixture.n_components"] == 6.0 and metrics["mixture.n_averaged_away"] == 0.0
    assert metrics["mixture.component.la-student/T0.5.n_satisfied"] == 3.0
    assert (
        metrics["mixture.averaged_away.s1-01"] == 0.0 and "mixture.near_deterministic_family.T0.5" in metrics
    )
    assert tags["mixture.averaged_away"] == "False" and tags["mixture.order_matched"] == "True"
