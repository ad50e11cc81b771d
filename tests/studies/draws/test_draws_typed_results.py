"""The draws study's typed results: every mode no registered run covers (imported draws with a
flagged source, an inspect_ai log with its audit and error bars, a run without a family) reads
back byte for byte, and a results.json with a field of the wrong type is refused in one line
naming the file and the field."""

from __future__ import annotations

import json
import random
import shutil
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from draws_helpers import FAST

from lmaudit.console import main as lmaudit_main
from lmaudit.pipeline import run
from lmaudit.provenance.digest import canonical_json
from lmaudit.studies.draws import views
from lmaudit.studies.draws.analysis import analyze_records
from lmaudit.studies.draws.results import DrawsResults, PersistenceTest
from lmaudit.studies.registry import get_study

REPO = Path(__file__).resolve().parents[3]
SMALL = ("study.permutations=199", "study.sims_per_step=50")


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _reads_back(out: Path) -> DrawsResults:
    """The run's results.json as the study reads it, checked to write the same JSON back."""
    path = out / "results.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    result = get_study("draws").result(doc, str(path))
    assert isinstance(result.results, DrawsResults)
    assert canonical_json(result.results.to_json()) == canonical_json(doc)
    return result.results


def test_an_import_with_a_flagged_source_reads_back_byte_for_byte(make_cfg, tmp_path) -> None:
    rng = random.Random(6)
    rows = [
        {"family": "m", "source": src, "condition": "c", "probe": f"{src}{i}", "draws": draws}
        for i in range(20)
        for src, draws in (("honest", rng.choices("ABC", k=10)), ("sorted", sorted(rng.choices("ABC", k=10))))
    ]
    path = _jsonl(tmp_path / "draws.jsonl", rows)
    run(make_cfg("study=draws", f"study.import_path={path}", *SMALL, "mlflow.enabled=false", name="flagged"))
    res = _reads_back(tmp_path / "flagged")
    fam = res.families["m"]
    assert res.mode == "import" and res.normalise is None and res.log_audit is None
    assert fam.flagged_sources == ("sorted",) and fam.without_flagged is not None
    assert fam.without_flagged.n_sequences == 20 and res.flagged == [("m", "sorted")]


def test_an_inspect_log_reads_back_byte_for_byte_with_its_audit_and_error_bars(
    make_cfg, tmp_path, monkeypatch
) -> None:
    pytest.importorskip("inspect_ai")
    monkeypatch.setenv("INSPECT_LOG_LEVEL", "error")
    monkeypatch.setenv("INSPECT_CACHE_DIR", str(tmp_path / "inspect-cache"))
    monkeypatch.setenv("INSPECT_DISPLAY", "none")
    sys.path.insert(0, str(REPO / "tests" / "interop"))
    from draws_interop_helpers import planted, run_draws, run_inspect

    rng = random.Random(3)
    log = run_inspect(
        tmp_path / "logs",
        "mockllm/model",
        {f"s{i}": planted(rng, 6, 0.5) for i in range(8)},
        epochs=6,
        temperature=1.0,
    )
    out, _ = run_draws(make_cfg, log, "inspect", "mlflow.enabled=false")
    res = _reads_back(out)
    assert res.log_audit is not None and res.log_audit.format == "inspect"
    assert res.normalise == res.log_audit.normalise and res.normalise is not None
    ((model, _task, bar),) = res.error_bar_entries()
    assert bar.n == 48 and bar.clusters == 8 and bar.epochs_persist is not None
    assert bar.epochs_persist.holm_p == res.families[model].holm_p


def test_results_without_a_family_read_back_byte_for_byte() -> None:
    empty = analyze_records([], FAST, exclude_patterns=["pred-*"])
    doc = empty.to_json()
    assert canonical_json(DrawsResults.from_json(doc).to_json()) == canonical_json(doc)
    assert doc["families"] == {} and doc["sources"] == [] and "log_audit" not in doc
    assert views.metrics(empty)["n_families"] == 0 and views.tags(empty)["flagged_sources"] == "none"


def test_a_results_file_with_a_wrong_field_is_one_line_naming_file_and_field(
    make_cfg, tmp_path, capsys
) -> None:
    run(make_cfg("study=draws", "model=sim_persistent", *SMALL, "mlflow.enabled=false", name="a"))
    edited = tmp_path / "edited"
    shutil.copytree(tmp_path / "a", edited)
    path = edited / "results.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    (name,) = doc["families"]
    doc["families"][name]["holm_p"] = "0.01"  # a number written as a string
    path.write_text(json.dumps(doc), encoding="utf-8")
    (edited / "report.html").unlink()
    field = f"not a DrawsResults: field 'families.{name}.holm_p'"

    def refused(*args: str) -> str:
        assert lmaudit_main(list(args)) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and field in err, err
        return err

    # lmaudit compare reads each run's results through the study
    assert str(path) in refused(
        "compare", str(tmp_path / "a"), str(edited), "--json", str(tmp_path / "p.json")
    )
    assert not (tmp_path / "p.json").exists()
    # lmaudit report rebuilds the page from the typed results: refused, nothing written
    refused("report", str(edited), "--conf", str(REPO / "conf"))
    assert not (edited / "report.html").exists()


def test_a_source_row_carries_its_columns_persistence_test() -> None:
    """The flat per-source table repeats each source column's persistence test, field for field."""
    path = REPO / "results" / "draws" / "draws_sim_persistent" / "results.json"
    res = DrawsResults.from_json(path.read_text(encoding="utf-8"), str(path))

    def test_of(x: PersistenceTest) -> dict[str, Any]:
        return {f.name: getattr(x, f.name) for f in fields(PersistenceTest)}

    assert res.sources and len(fields(PersistenceTest)) == 10
    for row in res.sources:
        column = res.families[row.family].sources[row.source]
        assert isinstance(row, PersistenceTest) and isinstance(column, PersistenceTest)
        assert test_of(row) == test_of(column)
