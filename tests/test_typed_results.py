"""Typed results: the shared base reads back exactly what it writes, refuses what does not fit
with one line naming the file and field, and every registered run's results.json is one of its
study's typed results, byte for byte."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any, cast

import pytest

from lmaudit.errors import InputError
from lmaudit.provenance.digest import canonical_json
from lmaudit.results import OMIT_NONE, FileDigest, Interval
from lmaudit.studies.envelope import CompoundPrediction, RegistrationFile, SimplePrediction, StudyResults
from lmaudit.studies.registry import get_study

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(ROOT.glob("results/*/*/results.json"))


class _Sample(StudyResults, kw_only=True):
    n: int
    p: float
    ci: Interval | None
    note: Annotated[str | None, OMIT_NONE] = None
    by_name: dict[str, Interval]


DOC = {"n": 3, "p": 0.25, "ci": [0.1, 0.9], "by_name": {"a": [0.0, 1.0]}}


def test_round_trip_keeps_types_and_leaves_out_absent_keys() -> None:
    r = _Sample.from_json(DOC)
    assert r.ci == Interval(0.1, 0.9) and r.note is None and r.by_name["a"].width == 1.0
    assert canonical_json(r.to_json()) == canonical_json(DOC)
    assert _Sample.from_json({**DOC, "note": "x"}).to_json()["note"] == "x"


def test_a_record_is_a_frozen_dataclass_by_deriving_from_the_base() -> None:
    r = _Sample.from_json(DOC)
    assert dataclasses.is_dataclass(r) and [f.name for f in dataclasses.fields(r)][-2:] == ["note", "by_name"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.n = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        cast(Any, _Sample)(3, 0.25, None, None, {})  # kw_only=True: keywords only
    assert dataclasses.replace(r, n=4).n == 4 and r == _Sample.from_json(DOC)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"extra": 1}, "extra"),  # an unknown key
        ({"n": 3.0}, "n"),  # a float where an int belongs
        ({"p": "0.25"}, "p"),  # a string where a number belongs
        ({"ci": [0.1]}, "ci"),  # an interval of one end
    ],
)
def test_what_does_not_fit_is_one_line_naming_file_and_field(change: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        _Sample.from_json({**DOC, **change}, "runs/x/results.json")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("runs/x/results.json: not a _Sample: field ")
    assert repr(field) in msg or f"'{field}." in msg


@pytest.mark.parametrize(
    ("sample", "field"),
    [
        (_Sample(n=1, p=float("nan"), ci=None, by_name={}), "p"),
        (_Sample(n=1, p=0.5, ci=Interval(0.0, float("inf")), by_name={}), "ci.1"),
        (_Sample(n=1, p=0.5, ci=None, by_name={"a": Interval(float("nan"), 1.0)}), "by_name.a.0"),
    ],
)
def test_a_number_json_cannot_hold_is_refused_naming_its_field(sample: _Sample, field: str) -> None:
    """NaN and infinity are refused when written, never written as null (which would not read
    back as a number), plain numbers and interval ends alike."""
    with pytest.raises(ValueError, match=rf"^_Sample: field '{field}' is (nan|inf), which JSON cannot hold$"):
        sample.to_json()


def test_an_interval_is_written_as_two_floats() -> None:
    """An interval built from ints is written as the floats it reads back as."""
    doc = _Sample(n=1, p=0.5, ci=Interval(0, 1), by_name={}).to_json()
    assert json.dumps(doc["ci"]) == "[0.0, 1.0]"


def test_scored_predictions_are_simple_or_compound() -> None:
    simple = {
        "id": "P1",
        "metric": "n",
        "op": ">=",
        "value": 1,
        "description": "",
        "observed": 3,
        "outcome": "held",
        "reason": "",
    }
    check = {"metric": "n", "op": ">=", "value": 1}
    compound = {
        "id": "P2",
        "description": "",
        "all_of": [check],
        "observed": 3,
        "outcome": "held",
        "reason": "",
        "checks": [{**check, "observed": 3, "outcome": "held", "reason": ""}],
    }
    r = _Sample.from_json({**DOC, "predictions": [simple, compound]})
    assert r.predictions is not None
    assert [type(p) for p in r.predictions] == [SimplePrediction, CompoundPrediction]
    assert canonical_json(r.to_json()["predictions"]) == canonical_json([simple, compound])


@pytest.mark.parametrize("path", RUNS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_registered_run_reads_back_byte_for_byte(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    study = get_study(path.parent.parent.name)
    assert study.result_type is not None, f"{study.name} has no typed results"
    typed = study.result_type.from_json(doc, str(path))
    assert canonical_json(typed.to_json()) == canonical_json(doc)
    # the views recorded for the run (metrics.json) come from the typed results
    result = study.result(typed)
    stored = json.loads((path.parent / "metrics.json").read_text(encoding="utf-8"))
    for name, value in stored.items():
        if name in result.metrics:
            assert result.metrics[name] == value, name


def test_a_study_without_typed_results_is_refused_when_registered() -> None:
    from tests.plugins.tinystudy import TinyStudy

    from lmaudit.studies.registry import register_study

    untyped = type("Untyped", (TinyStudy,), {"name": "untyped", "result_type": None})
    with pytest.raises(TypeError, match=r"Untyped\.result_type must be its typed results"):
        register_study(untyped)


def test_a_registration_file_is_a_file_digest_that_says_whether_it_is_sealed() -> None:
    doc = {"path": "prereg/x.yaml", "sha256": "0f" * 32, "sealed": True}
    reg = RegistrationFile.from_json(doc, "prereg.json")
    assert isinstance(reg, FileDigest) and (reg.path, reg.sha256, reg.sealed) == (
        "prereg/x.yaml",
        "0f" * 32,
        True,
    )
    assert reg.to_json() == doc
    with pytest.raises(InputError, match=r"^prereg\.json: not a RegistrationFile: field 'sha256'"):
        RegistrationFile.from_json({**doc, "sha256": 15}, "prereg.json")
