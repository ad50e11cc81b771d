"""QQ measurement records: values are never coerced, ``label_of`` must be its mapping's
assignment, ``other`` is the record's own (checked against ``1 - sum(probs)``), and no
decision is certified by a margin finer than the rounding residual the records show.

Tolerances: residuals are 1e-7, as float32 softmaxes leave them; ``sum_tol`` (1e-6) is how far
``other`` may be from ``1 - sum(probs)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lmaudit.errors import InputError
from lmaudit.pipeline import run
from lmaudit.studies.qq import envelope as env
from lmaudit.studies.qq.estimation import analyze
from lmaudit.studies.qq.records import Measurement
from qq_sim_run import run_two_sim_items

QUESTION = {("AB", 1): "A", ("AB", 2): "B", ("BA", 1): "B", ("BA", 2): "A"}
MAP1 = {"y": "A", "n": "B"}


def record(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "item": "s1-01",
        "stratum": "S1",
        "mapping": "map1",
        "order": "AB",
        "position": 1,
        "question": "A",
        "first_answer": None,
        "label_of": dict(MAP1),
        "probs": {"A": 0.7, "B": 0.3},
        "other": 0.0,
    }
    return {**base, **over}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"probs": {"A": "0.7", "B": 0.3}}, r"field 'probs\.A' = '0\.7' is not a finite JSON number"),
        ({"probs": {"A": True, "B": 0.0}}, r"field 'probs\.A' = True is not a finite JSON number"),
        ({"probs": {"A": float("nan"), "B": 0.3}}, r"field 'probs\.A' = nan"),
        ({"probs": {"A": 1.2, "B": 0.3}}, r"field 'probs\.A' = 1\.2 is not a probability in \[0, 1\]"),
        ({"probs": {"A": 0.7, "B": -0.1}}, r"field 'probs\.B' = -0\.1 is not a probability"),
        ({"probs": []}, r"field 'probs' must be an object"),
        ({"other": "0"}, r"field 'other' = '0' is not a finite JSON number"),
        ({"other": False}, r"field 'other' = False"),
        ({"label_of": {"y": "A"}}, r"field 'label_of'.*must map 'y' and 'n'"),
        ({"label_of": {"y": "A", "n": "A"}}, r"y and n share one label"),
        ({"label_of": {"y": "A", "n": "C"}}, r"no probability for label\(s\) \['C'\]"),
    ],
)
def test_from_json_refuses_instead_of_coercing(over: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Measurement.from_json(record(**over))


def test_from_json_accepts_integers_and_exact_bounds() -> None:
    m = Measurement.from_json(record(probs={"A": 1, "B": 0}))
    assert m.p_y == 1 and m.p_n == 0


# --- item 14: the record's other, its residual, and the residual margin --------------------------


def six(p_y: list[float], p_n: list[float], other: list[float], item: str = "b") -> list[Measurement]:
    out = []
    for (order, pos, first), py, pn, o in zip(env.POSITIONS, p_y, p_n, other, strict=True):
        out.append(
            Measurement(
                item, "S1", "map1", order, pos, QUESTION[(order, pos)], first, MAP1, {"A": py, "B": pn}, o
            )
        )
    return out


# deterministic order flip: AB answers (y, n), BA answers (y, y): |q| = OSS = 1, Γ = 0. Positions
# 2 and 5 (never reached) are float32-style halves summing to 1 + 1e-7.
HALF = 0.5 + 5e-8
FLIP_PY = [1.0, 0.0, HALF, 1.0, 1.0, HALF]
FLIP_PN = [0.0, 1.0, HALF, 0.0, 0.0, HALF]


@pytest.mark.parametrize("recorded_other", [0.0, -1e-7])  # clamped at measurement, or raw
def test_boundary_item_with_negative_residual_is_indeterminate(recorded_other: float) -> None:
    other = [0.0, 0.0, recorded_other, 0.0, 0.0, recorded_other]
    res = analyze(six(FLIP_PY, FLIP_PN, other))
    it = res.items[0]
    assert abs(abs(it.q) - it.oss) < 1e-12  # on |q| = OSS
    assert it.gamma_bounds.hi <= 0.0  # the envelope alone would certify it ...
    assert it.gamma_class == "INDETERMINATE"  # ... by a margin below the records' rounding
    assert it.precision == pytest.approx(1e-7, rel=1e-6)
    assert it.mappings[0].positions[2].other == pytest.approx(1e-7, rel=1e-6)  # residual kept


def test_residual_widens_the_envelope() -> None:
    # position 0 sums to 1 + 1e-7 (other recorded as 0): the residual becomes unassigned mass
    p_y = [1.0, 0.2, 0.6, 0.3, 0.5, 0.4]
    p_n = [1e-7, 0.8, 0.4, 0.7, 0.5, 0.6]
    it = analyze(six(p_y, p_n, [0.0] * 6)).items[0]
    assert it.q_env.width > 1e-8  # clamping the residual away would leave width 0
    assert it.q_env.contains(it.q)
    summed_to_one = analyze(six(p_y, [0.0, *p_n[1:]], [0.0] * 6)).items[0]
    assert summed_to_one.q_env.width == 0.0


def test_other_must_agree_with_the_probabilities() -> None:
    ms = six([0.6] * 6, [0.3] * 6, [0.1] * 6)
    analyze(ms)  # consistent: fine
    bad = [*ms[:4], Measurement(**{**ms[4].to_json(), "other": 0.3}), ms[5]]
    with pytest.raises(ValueError, match=r"position 2 \(first answer 'y'\): field 'other' = 0\.3 disagrees"):
        analyze(bad)


# --- through the pipeline: file, record and field named -----------------------------------------


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real measurement file from the projective sim agent (two items, both mappings)."""
    return (
        run_two_sim_items(tmp_path_factory.mktemp("qq"), "study.gates.g3.enabled=false")
        / "measurements.jsonl"
    )


def _edited(src: Path, dst: Path, edit: Callable[[dict[str, Any]], bool]) -> int:
    """Copy ``src`` to ``dst`` with ``edit`` applied to the first record it accepts; its line."""
    lines, hit = [], 0
    for n, line in enumerate(src.read_text().splitlines(), start=1):
        row = json.loads(line)
        if not hit and edit(row):
            hit = n
        lines.append(json.dumps(row))
    dst.write_text("\n".join(lines) + "\n")
    assert hit
    return hit


def _reanalyse(make_cfg: Callable[..., Any], path: Path) -> None:
    run(make_cfg("stage=analyze", f"measurements={path}", "items.ids=[s1-01,s3-01]", "mlflow.enabled=false"))


def _string_prob(row: dict[str, Any]) -> bool:
    if row.get("kind", "position") != "position":
        return False
    label = row["label_of"]["y"]
    row["probs"][label] = str(row["probs"][label])
    return True


def _swapped_label_of(row: dict[str, Any]) -> bool:
    if row.get("kind", "position") != "position" or row.get("mapping") != "map1":
        return False
    row["label_of"] = {"y": row["label_of"]["n"], "n": row["label_of"]["y"]}
    return True


def _other_off(row: dict[str, Any]) -> bool:
    if row.get("kind", "position") != "position":
        return False
    row["other"] = 0.25
    return True


def test_reanalysis_refuses_string_probability(measured: Path, make_cfg: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    line = _edited(measured, path, _string_prob)
    with pytest.raises(InputError, match=rf"{path}: record {line}: field 'probs\.\w+' = '[\d.e-]+' is not"):
        _reanalyse(make_cfg, path)


def test_reanalysis_refuses_label_of_against_mapping(measured: Path, make_cfg: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _edited(measured, path, _swapped_label_of)
    with pytest.raises(
        InputError,
        match=rf"{path}: item 's1-01', mapping 'map1', .*field 'label_of' = .* disagrees with mapping",
    ):
        _reanalyse(make_cfg, path)


def test_reanalysis_refuses_other_disagreeing(measured: Path, make_cfg: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    _edited(measured, path, _other_off)
    with pytest.raises(
        InputError, match=rf"{path}: item .*field 'other' = 0\.25 disagrees with 1 - sum\(probs\)"
    ):
        _reanalyse(make_cfg, path)
