"""The seed's headline claims as a frozen, data-open registration (conf/prereg/choir_seed.yaml,
prereg/choir/choir_seed.json): the shipped file matches its config and re-freezes to the same
plan; imported lists (from the sim free-list generator) and imported ballots (with planted
cohort outcomes) go through the registered analysis and every prediction is scored."""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from lmaudit.backends.base import SampleRequest
from lmaudit.backends.sim.freelist import FreeListSampler
from lmaudit.errors import PreregError
from lmaudit.pipeline import run
from lmaudit.prereg import HELD, NOT_HELD, load_registration, parse_predictions, resolve
from lmaudit.provenance.digest import file_sha256

REPO = Path(__file__).resolve().parents[3]
QUESTIONS = {"H001": 6, "H003": 7, "H002": 40, "H007": 40, "H009": 40}
PERSONAS = ("archivist", "promoter", "nurse")


def _registered() -> list[Any]:
    raw = OmegaConf.to_container(OmegaConf.load(REPO / "conf/prereg/choir_seed.yaml").prereg.predictions)
    return parse_predictions(raw, "conf/prereg/choir_seed")


def test_the_shipped_registration_is_open_to_its_data_and_holds_the_seed_claims() -> None:
    doc = load_registration(REPO / "prereg/choir/choir_seed.json")
    assert doc["data"] == "open" and "import" not in doc["inputs"] and "ballots" not in doc["inputs"]
    assert "import_path" not in doc["config"]["study"]
    assert "import_path" not in doc["config"]["study"]["ranking"]
    assert [p.to_dict() for p in _registered()] == doc["predictions"]
    assert [p["id"] for p in doc["predictions"]] == [f"P{i}" for i in range(1, 11)]
    rules = doc["decision_rules"]
    assert (rules["shuffles"], rules["permutations"], rules["n_boot"], rules["n_null"]) == (1000,) * 4
    assert rules["codebook"] == {
        "min_cluster_size": 5,
        "cluster_selection_epsilon": 0.3,
        "metric": "cosine",
        "noise": "singleton",
        "metric_sensitivity": True,  # C_q, R_q, W_q also under the other metric, reported beside
    }


def test_freezing_needs_no_data_and_reproduces_the_shipped_plan(make_cfg, tmp_path) -> None:
    run(
        make_cfg(
            "prereg=choir_seed",
            "stage=freeze",
            f"paths.prereg={tmp_path / 'prereg'}",
            "study.import_path=/nonexistent/lists.jsonl",
            "study.ranking.import_path=/nonexistent/ballots.jsonl",
            "study.profiles_path=/nonexistent/profiles.jsonl",
        )
    )
    fresh = load_registration(tmp_path / "prereg/choir/choir_seed.json")
    shipped = load_registration(REPO / "prereg/choir/choir_seed.json")
    assert fresh["plan_digest"] == shipped["plan_digest"] and fresh["predictions"] == shipped["predictions"]


def _lists(path: Path) -> Path:
    """Free lists of four sim members with planted signatures, persona shift and (two members)
    profile leakage, on two narrow and three wide questions, exported as import JSONL."""
    personas = {
        json.loads(x)["id"]: json.loads(x)["text"]
        for x in (REPO / "data/choir/personas.jsonl").read_text().splitlines()
    }
    bank = {
        json.loads(x)["id"]: json.loads(x)["text"]
        for x in (REPO / "data/choir/infinity_chat_100.jsonl").read_text().splitlines()
    }
    lines = []
    for m in range(4):
        gen = FreeListSampler(
            signature=m + 1,
            signature_strength=2.0,
            persona_strength=3.0,
            leak=0.3 * (m < 2),
            widths=QUESTIONS,
        )
        for q in QUESTIONS:
            for template, persona in [("A", "none"), ("B", "none")] + [("A", p) for p in PERSONAS]:
                system = () if persona == "none" else ({"role": "system", "content": personas[persona]},)
                req = SampleRequest(
                    messages=(*system, {"role": "user", "content": bank[q]}),
                    n=2,
                    temperature=0.7,
                    seed=zlib.crc32(f"{m}:{q}:{template}:{persona}".encode()),
                    meta={"question": q, "question_text": bank[q], "persona": persona, "items": 15},
                )
                for g, raw in enumerate(gen.sample([req])[0].texts):
                    lines.append(
                        {"model": f"m{m + 1}", "question": q, "template": template, "temperature": 0.7}
                        | {"persona": persona, "generation": g, "raw": raw}
                    )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


# planted tops per question (conditioned cohort, unconditioned cohort): A, B conditioned-source;
# C, D unconditioned. Conditioned cohort: 4/5 conditioned; unconditioned: 4/5; tops agree 3/5.
PLANTED = {"H001": ("A", "A"), "H002": ("B", "B"), "H003": ("A", "A"), "H007": ("A", "B"), "H009": ("C", "D")}
CANDIDATES = [
    ("A", "conditioned_consensus"),
    ("B", "conditioned_rare"),
    ("C", "unconditioned_consensus"),
    ("D", "unconditioned_rare"),
]


def _ballots(path: Path) -> Path:
    lines = []
    for q, tops in PLANTED.items():
        cands = [{"label": lab, "text": f"{q} idea {lab}", "pool": pool} for lab, pool in CANDIDATES]
        for cohort, top in zip(("conditioned", "unconditioned"), tops, strict=True):
            order = [top, *[lab for lab, _ in CANDIDATES if lab != top]]
            for e in range(3):
                for persona in PERSONAS if cohort == "conditioned" else ("none",):
                    b = {
                        "question": q,
                        "cohort": cohort,
                        "evaluator": f"e{e}",
                        "persona": persona,
                        "candidates": cands,
                    }
                    lines.append(b | ({"raw": " > ".join(order)} if e else {"ranking": order}))
    lines.append(  # an unreadable answer: kept and counted, never scored
        {
            "question": "H001",
            "cohort": "unconditioned",
            "evaluator": "e9",
            "candidates": cands,
            "raw": "all good",
        }
    )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _profiles(path: Path) -> Path:
    """The imported lists' own profiles (here: the texts of the personas the sim lists name)."""
    rows = [json.loads(x) for x in (REPO / "data/choir/personas.jsonl").read_text().splitlines() if x.strip()]
    path.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in rows if r["text"]))
    return path


def test_the_registration_scores_imported_lists_and_ballots(make_cfg, tmp_path) -> None:
    lists, ballots = _lists(tmp_path / "lists.jsonl"), _ballots(tmp_path / "ballots.jsonl")
    profiles = _profiles(tmp_path / "profiles.jsonl")
    run(
        make_cfg(
            "prereg=choir_seed",
            f"study.import_path={lists}",
            f"study.ranking.import_path={ballots}",
            f"study.profiles_path={profiles}",
            f"paths.prereg={REPO / 'prereg'}",
            "mlflow.enabled=true",
            name="scored",
        )
    )
    res = json.loads((tmp_path / "scored/results.json").read_text())
    out = {p["id"]: p for p in res["predictions"]}
    # the planted ranking outcomes
    rank = res["ranking"]["summary"]
    assert (rank["conditioned_cohort"]["count"], rank["unconditioned_cohort"]["count"]) == (4, 4)
    assert rank["agree_top"]["count"] == 3 and rank["n_invalid"] == 1
    assert [out[k]["outcome"] for k in ("P8", "P9", "P10")] == [NOT_HELD, HELD, HELD]
    # the rest read off the registered analysis's own numbers (each check: its rule applied)
    for p in _registered():
        if p.id in ("P8", "P9", "P10"):
            continue
        observed = [resolve(res, c.metric)[1] for c in p.checks]
        assert all(isinstance(x, int | float) for x in observed), (p.id, observed)
        holds = all(
            {">=": x >= c.value, ">": x > c.value, "<": x < c.value}[c.op]
            for x, c in zip(observed, p.checks, strict=True)
        )
        assert out[p.id]["outcome"] == (HELD if holds else NOT_HELD), p.id
    # planted member signatures: member identity is the more recoverable label
    assert res["recoverability"]["model"]["accuracy"] > res["recoverability"]["persona"]["accuracy"]
    # the registration binds the analysis; the data scored are recorded by digest
    assert res["prereg"]["name"] == "choir_seed" and res["prereg"]["data"] == "open"
    inputs = res["prereg"]["data_scored"]["plan_inputs"]
    assert inputs["import"]["sha256"] == file_sha256(lists) and inputs["ballots"]["sha256"] == file_sha256(
        ballots
    )
    assert inputs["profiles"]["sha256"] == file_sha256(profiles)
    db = sqlite3.connect(tmp_path / "mlruns" / "mlflow.db")
    tags = dict(db.execute("select key, value from tags"))
    assert {tags[f"prediction.{k}"] for k in out} <= {HELD, NOT_HELD} and tags["prediction.P8"] == NOT_HELD
    assert "4/5" in tags["ranking"]
    html = (tmp_path / "scored/report.html").read_text()
    assert "ranking.summary.conditioned_cohort.share" in html and "Source-blind ranking" in html


def test_the_open_registration_still_binds_the_analysis(make_cfg, tmp_path) -> None:
    ballots = _ballots(tmp_path / "ballots.jsonl")
    with pytest.raises(PreregError, match=r"config\.study\.ranking\.k"):
        run(
            make_cfg(
                "prereg=choir_seed",
                f"study.import_path={ballots}",
                f"study.ranking.import_path={ballots}",
                "study.ranking.k=5",
                "study.profiles_path=null",
                f"paths.prereg={REPO / 'prereg'}",
                "mlflow.enabled=false",
                name="changed",
            )
        )
    assert not (tmp_path / "changed").exists()
