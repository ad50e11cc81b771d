"""Ground truth through the whole pipeline: sim generators with planted model signatures,
persona shifts, echo and prompt widths; the analysis recovers what was planted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from choir_quick import QUICK_CHOIR
from lmaudit.pipeline import run

WIDTHS = {"H001": 6, "H003": 7, "H002": 60, "H007": 60}  # two narrow, two wide questions


def _yaml(v: Any) -> str:
    return json.dumps(v).replace(chr(34), "")


def _member(name: str, signature: int, **params: Any) -> str:
    p = {"signature": signature, "widths": WIDTHS, **params}
    inner = ", ".join(f"{k}: {_yaml(v)}" for k, v in p.items())
    return f"{{backend: sim, name: {name}, agent: freelist, params: {{{inner}}}}}"


def _run(make_cfg: Any, tmp_path: Path, name: str, **params: Any) -> dict[str, Any]:
    members = [_member(f"m{i}", i + 1, **params) for i in range(4)]
    cfg = make_cfg(
        "study=choir",
        f"study.ensemble.members=[{', '.join(members)}]",
        "study.question_ids=[H001,H002,H003,H007]",
        "study.templates=[A]",
        "study.personas=[archivist,promoter]",
        "study.temperatures=[1.0]",
        "study.generations=4",
        "study.items_per_list=15",
        "study.embedder.kind=sim",
        "study.shuffles=200",
        "study.permutations=200",
        "study.n_boot=200",
        "study.n_null=100",
        "mlflow.enabled=false",
        name=name,
    )
    run(cfg)
    return dict(json.loads((tmp_path / name / "results.json").read_text()))


def test_planted_signatures_widths_persona_shift_and_echo_are_recovered(make_cfg, tmp_path):
    res = _run(make_cfg, tmp_path, "planted", signature_strength=2.0, persona_strength=3.0)
    qs = res["questions"]
    # width: the narrow questions (6-7 concepts: every member lists them all) have high
    # cross-model RBO and width ~0; the wide ones (60 concepts) lower RBO and larger width
    for narrow in ("H001", "H003"):
        for wide in ("H002", "H007"):
            assert qs[narrow]["R_q"] > qs[wide]["R_q"]
            assert qs[narrow]["width"] < qs[wide]["width"]
    assert all(qs[q]["C_q"] <= WIDTHS[q] for q in ("H001", "H003"))  # the codebook finds the concepts
    # model signatures: member identity is recoverable above the null band by the seed's nearest-cell
    # classifier (the persona, planted stronger here, pulls some neighbours to other members), and
    # far above chance (0.25) by the class-centroid sensitivity on question-centred cells
    for key, floor in (("model", 0.3), ("model_class_centroid", 0.7)):
        rec = res["recoverability"][key]
        assert rec["accuracy"] >= floor and rec["accuracy"] > rec["null_band"][1] and rec["p"] < 0.05, key
    # a persona boosts the same concepts in every member: same-persona agreement rises in wide questions
    for wide in ("H002", "H007"):
        assert qs[wide]["lift"]["relative"] > 1.2, qs[wide]["lift"]
    # no echo planted: pseudo-word concepts are never near the question's words
    assert all(v["echo_rate"] == 0.0 for v in qs.values())
    # the member-cluster association is detected in the wide questions
    assert all(qs[q]["codebook_test"]["p"] < 0.05 for q in ("H002", "H007"))
    # every per-condition cell is named by a condition of the design (docs/choir.md), once each
    design = res["design"]["conditions"]
    assert design == ["A", "A|archivist", "A|promoter"]
    for q in qs.values():
        cells = q["conditions"]["cells"]
        assert {c["condition"] for c in cells} == set(design)
        assert len(cells) == 4 * len(design)  # members x conditions at the one temperature


def test_without_signatures_or_personas_nothing_is_recovered_and_echo_is_measured(make_cfg, tmp_path):
    res = _run(make_cfg, tmp_path, "null", signature_strength=0.0, persona_strength=0.0, echo=0.4)
    qs = res["questions"]
    rec = res["recoverability"]["model"]
    assert rec["accuracy"] <= rec["null_band"][1] + 0.1  # member identity is not recoverable
    lifts = [qs[q]["lift"]["relative"] for q in ("H002", "H007")]
    assert abs(float(np.mean(lifts)) - 1.0) < 0.35  # no persona shift planted
    # echo: 40% of entries are a question word; the echo rate counts them (sim embedder: a word
    # and the same word capitalised embed identically)
    for v in qs.values():
        assert 0.25 <= v["echo_rate"] <= 0.55, v["echo_rate"]


def test_planted_profile_leakage_is_measured_and_stripped(make_cfg, tmp_path):
    members = [
        _member("m1", 1, signature_strength=2.0, leak=0.4),
        _member("m2", 2, signature_strength=2.0, leak=0.4),
        _member("m3", 3, signature_strength=2.0),
        _member("m4", 4, signature_strength=2.0),
    ]
    cfg = make_cfg(
        "study=choir",
        f"study.ensemble.members=[{', '.join(members)}]",
        "study.question_ids=[H001,H002,H003,H007]",
        "study.templates=[A]",
        "study.personas=[archivist,promoter]",
        "study.generations=4",
        "study.items_per_list=15",
        *QUICK_CHOIR,
        "mlflow.enabled=false",
        name="leak",
    )
    run(cfg)
    leak = json.loads((tmp_path / "leak/results.json").read_text())["leakage"]
    rate = leak["model_leakage"]
    # a profile word embeds exactly like itself (sim embedder: similarity 1): planted in 40% of
    # m1's and m2's entries, in none of m3's and m4's, whose items sit near no profile word
    # (the sim embedder's hashed words share some coordinates: unrelated words sit near 0.15)
    assert 0.35 <= rate["m1"] <= 0.6 and 0.35 <= rate["m2"] <= 0.6
    assert (
        max(rate["m3"], rate["m4"]) < 0.2 < 0.25 + max(rate["m3"], rate["m4"]) < min(rate["m1"], rate["m2"])
    )
    kept = [s["kept_share"] for s in leak["stripping"]]
    # stripping at any threshold drops at least the leaked words (similarity 1, ~20% of the
    # conditioned items; a concept whose filler word is also a profile word goes too), and a lower
    # threshold never keeps more
    assert all(k <= 0.85 for k in kept) and kept == sorted(kept, reverse=True)
    assert leak["model_spearman"]["n"] == 4
    # each re-run carries its classifiers' bootstrap intervals, around its accuracy
    for s in leak["stripping"]:
        for acc, ci in (
            (s["model_accuracy"], s["model_ci"]),
            (s["persona_within_model_loqo_accuracy"], s["persona_within_model_loqo_ci"]),
        ):
            assert ci[0] <= acc <= ci[1] and ci[0] < ci[1]
        assert s["persona_within_model_loqo_above_chance"] == (
            s["persona_within_model_loqo_ci"][0] > s["persona_within_model_loqo_chance"]
        )
