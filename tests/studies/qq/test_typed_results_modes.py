"""The QQ study's typed results for the shapes of results.json no registered run holds: the
sampled estimand (its region, ``sampled_alpha``), a mixture over the sampled base, items left
out, gates G1 and G3 not run. Each reads back byte for byte; a results.json with a field that
does not fit is refused in one line naming the file and the field (``lmaudit compare``, which
reads the typed results), before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

from test_undefined_positions import P_N, P_Y, six

from lmaudit.console import main as lmaudit_main
from lmaudit.pipeline import run
from lmaudit.provenance.digest import canonical_json
from lmaudit.studies.qq.estimation import analyze
from lmaudit.studies.qq.gates import LabelPieces, gate_g1
from lmaudit.studies.qq.mixture.section import EstimandCounts
from lmaudit.studies.qq.results import Counts, QQResults
from lmaudit.studies.registry import get_study


def _round_trip(path: Path) -> QQResults:
    """The run's results.json read back as QQResults, which must write the same bytes."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    typed = QQResults.from_json(doc, str(path))
    assert canonical_json(typed.to_json()) == canonical_json(doc)
    return typed


def test_a_sampled_run_without_g3_reads_back_byte_for_byte(make_cfg, tmp_path: Path) -> None:
    run(
        make_cfg(
            "model=sim_projective",
            "items=sim_demo",
            "estimand=sampled",
            "estimand.n=50",
            "study.gates.g3.enabled=false",
            "mlflow.enabled=false",
            name="smp",
        )
    )
    typed = _round_trip(tmp_path / "smp" / "results.json")
    assert typed.sampling_error is not None and typed.params.sampled_alpha is not None
    assert typed.sampled and typed.gates.G3.status == "NOT_RUN" and typed.gates.G3.alpha is None
    region = typed.sampling_error.items[0]
    assert all(len(bounds) == 6 for bounds in region.p_bounds.values())


def test_a_mixture_over_the_sampled_base_reads_back_byte_for_byte(make_cfg, tmp_path: Path) -> None:
    run(
        make_cfg(
            "model=sim_projective",
            "items=sim_demo",
            "estimand=mixture",
            "study.estimand.mixture.base=sampled",
            "study.estimand.mixture.personas=[none,iowa-farmer]",
            "study.estimand.mixture.temperatures=[1.0]",
            "estimand.n=50",
            "study.gates.g3.enabled=false",
            "mlflow.enabled=false",
            name="mix",
        )
    )
    typed = _round_trip(tmp_path / "mix" / "results.json")
    assert typed.mixture is not None and typed.mixture.base == "sampled"
    assert typed.sampling_error is not None
    # the aggregate's region is every component's: no bounds of its own
    assert all(r.p_bounds == {} for r in typed.sampling_error.items)
    assert "sampled_alpha" not in typed.to_json()["params"]  # the aggregate's estimand is "mixture"


def test_items_left_out_and_gates_not_run_read_back_byte_for_byte() -> None:
    good = six("a", P_Y, P_N, [0.0] * 6)
    bad = six("b", [P_Y[0], 0.0, *P_Y[2:]], [P_N[0], 0.0, *P_N[2:]], [0.0, 1.0, 0, 0, 0, 0])
    doc = analyze([*good, *bad]).results().to_json()
    assert doc["counts"]["excluded"] == 1 and doc["gates"]["G1"] == {"status": "NOT_RUN", "checked": 0}
    assert doc["gates"]["G3"] == {"status": "NOT_RUN", "checks": []}
    typed = QQResults.from_json(doc)
    assert canonical_json(typed.to_json()) == canonical_json(doc)
    assert typed.excluded is not None and typed.excluded[0].undefined[0].position == 2
    assert get_study("qq").result(doc).metrics["n_excluded"] == 1


def test_a_results_field_that_does_not_fit_is_one_line_naming_file_and_field(
    make_cfg, tmp_path: Path, capsys
) -> None:
    for name in ("a", "b"):
        run(make_cfg("model=sim_projective", "items=sim_demo", "mlflow.enabled=false", name=name))
    path = tmp_path / "b" / "results.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["items"][0]["q"] = "0.5"  # a string where the study writes a number
    path.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "paired.json"
    assert lmaudit_main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{path}: not a QQResults: field 'items.0.q'" in err, err
    assert not out.exists()  # refused before anything is written


def test_g1_records_each_labels_pieces_as_fields() -> None:
    rows = [
        {"kind": "g1", "pieces": {"Yes": ["Yes"], "No": ["N", "o"]}},
        {"kind": "g1", "pieces": {"Yes": ["Yes"]}},
    ]
    gate = gate_g1(rows)
    assert (gate.status, gate.checked, gate.failed) == ("FAIL", 2, 1)
    assert gate.label_pieces == (LabelPieces("No", ("N", "o")), LabelPieces("Yes", ("Yes",)))
    assert gate.to_json()["label_pieces"] == [
        {"label": "No", "pieces": ["N", "o"]},
        {"label": "Yes", "pieces": ["Yes"]},
    ]


def test_a_runs_counts_are_an_estimands_counts_with_the_items_left_out() -> None:
    plain = {"verdict": {"HOLDS": 2, "VIOLATED": 1}, "gamma_class": {"small": 3}, "saturated": 1}
    counts = Counts.from_json(plain)
    assert isinstance(counts, EstimandCounts) and counts.excluded is None
    assert counts.to_json() == plain  # no items left out: no key
    assert Counts.from_json({**plain, "excluded": 2}).to_json() == {**plain, "excluded": 2}
