"""The QQ item bank: the shipped pilot bank, validation messages and item selection."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from lmaudit.errors import InputError, ItemBankError, ItemSelectionError
from lmaudit.studies.qq.items import ITEM_FIELDS, load_bank
from lmaudit.studies.qq.selection import select_items

REPO = Path(__file__).resolve().parents[3]
PILOT = REPO / "data" / "qq" / "items" / "pilot.json"

PILOT_IDS = [
    *("s1-01", "s1-02", "s1-04", "s1-05", "s1-06", "s1-07", "s1-09", "s1-10", "s1-11", "s1-12"),
    *("s2-01", "s2-02", "s2-09"),
    *("s3-01", "s3-03", "s3-08", "s3-09", "s3-11"),
]
TRACK_P_YEARS = {
    "s1-01": 1997,
    "s1-02": 1995,
    "s1-04": 1996,
    "s1-06": 1979,
    "s1-11": 2008,
    "s1-12": 2012,
    "s2-01": 1997,
    "s2-02": 1995,
}
# id -> (pair type, semantic options, sensitive), as in the pilot's manifest
MANIFEST = {
    "s1-01": ("consistency", ("Yes", "No"), False),
    "s1-02": ("consistency", ("Yes", "No"), False),
    "s1-04": ("contrast", ("A few", "Many"), True),
    "s1-05": ("reciprocity", ("Yes", "No"), False),
    "s1-06": ("context contrast", ("Yes", "No"), True),
    "s1-07": ("reciprocity", ("Yes", "No"), False),
    "s1-09": ("consistency", ("Approve", "Disapprove"), False),
    "s1-10": ("consistency", ("Approve", "Disapprove"), False),
    "s1-11": ("reciprocity", ("Too personally critical", "Not too personally critical"), False),
    "s1-12": ("consistency", ("Favor", "Oppose"), True),
    "s2-01": ("consistency", ("Yes", "No"), False),
    "s2-02": ("consistency", ("Yes", "No"), False),
    "s2-09": ("consistency", ("Approve", "Disapprove"), False),
    "s3-01": ("consistency", ("Yes", "No"), False),
    "s3-03": ("contrast", ("Yes", "No"), False),
    "s3-08": ("contrast", ("Yes", "No"), False),
    "s3-09": ("consistency", ("Yes", "No"), False),
    "s3-11": ("mutual obligation", ("Yes", "No"), False),
}


# --- the shipped bank ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pilot():
    return load_bank(PILOT)


def test_pilot_bank_validates_with_the_manifest_shape(pilot) -> None:
    assert (pilot.name, pilot.version) == ("pilot", "1.0")
    assert len(pilot) == 18
    assert pilot.ids == PILOT_IDS
    for item in pilot:
        assert item.stratum == item.id[:2].upper()
        assert (item.pair_type, item.options, item.sensitive) == MANIFEST[item.id], item.id


def test_pilot_track_p_items_and_years(pilot) -> None:
    track_p = [it for it in pilot if it.track_p]
    assert [it.id for it in track_p] == list(TRACK_P_YEARS)
    assert [it.reference_year for it in track_p] == [1997, 1995, 1996, 1979, 2008, 2012, 1997, 1995]
    assert all(it.reference_year is None for it in pilot if not it.track_p)
    assert select_items(pilot, None, track_p_only=True) == track_p


def test_pilot_headers_matching_and_vignettes(pilot) -> None:
    headers = {it.id: it.header for it in pilot if it.header is not None}
    assert set(headers) == {"s1-05", "s1-11"}
    assert "Cold War" in headers["s1-05"]
    assert "2008" in headers["s1-11"]
    assert {it.id: it.matched_to for it in pilot if it.stratum == "S2"} == {
        "s2-01": "s1-01",
        "s2-02": "s1-02",
        "s2-09": "s1-09",
    }
    assert [it.id for it in pilot if it.monitored] == ["s2-02"]
    assert {it.id for it in pilot if it.vignette is not None} == {"s3-01", "s3-03", "s3-08", "s3-09"}


def test_pilot_s3_are_yes_no_and_s2_keep_s1_options(pilot) -> None:
    for item in pilot:
        if item.stratum == "S3":
            assert item.options == ("Yes", "No")
            assert item.yes_no_labels
        else:
            assert not item.yes_no_labels
        if item.matched_to is not None:
            assert item.options == pilot[item.matched_to].options


def test_pilot_verbatim_examples(pilot) -> None:
    s104, s201, s301 = pilot["s1-04"], pilot["s2-01"], pilot["s3-01"]
    assert s104.question_a == "Do you think that only a few or many white people dislike black people?"
    assert s104.question_b == "Do you think that only a few or many black people dislike white people?"
    assert s201.question_a == "Do you generally think Tony Blair is honest and trustworthy?"
    assert s201.question_b == "Do you generally think Gordon Brown is honest and trustworthy?"
    assert s301.question_a == "Should Candidate K advance to the interview stage?"
    assert s301.vignette is not None and s301.vignette.startswith("Two candidates applied")
    assert s201.semantic == {"y": "Yes", "n": "No"}
    assert s104.question("B") == s104.question_b


def test_pilot_questions_are_single_sentences(pilot) -> None:
    for item in pilot:
        for q in (item.question_a, item.question_b):
            assert q.endswith("?"), (item.id, q)
            assert not re.search(r"(?<![A-Z])[.?!]\s", q), (item.id, q)  # "George W. Bush" is fine
        assert item.notes, item.id


def test_digest_is_sha256_of_the_file_bytes(pilot) -> None:
    assert pilot.digest == hashlib.sha256(PILOT.read_bytes()).hexdigest()


def test_item_round_trips_to_json(pilot) -> None:
    doc = json.loads(PILOT.read_text(encoding="utf-8"))
    assert [it.to_json() for it in pilot] == doc["items"]
    assert set(pilot["s1-01"].to_json()) == set(ITEM_FIELDS)


# --- malformed banks -------------------------------------------------------------------------


def _bank_doc() -> dict[str, Any]:
    return copy.deepcopy(json.loads(PILOT.read_text(encoding="utf-8")))


def _write(tmp_path: Path, doc: Any, name: str = "bank.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2), encoding="utf-8")
    return path


def _item(doc: dict[str, Any], item_id: str) -> dict[str, Any]:
    return next(it for it in doc["items"] if it["id"] == item_id)


def _error(path: Path) -> ItemBankError:
    with pytest.raises(ItemBankError) as info:
        load_bank(path)
    err = info.value
    assert str(path) in str(err)
    assert all(p.startswith(f"{path}: ") for p in err.problems)
    return err


def test_bad_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"bank": "x",\n  "version": "1", "items": [\n  {"id": "s1-01",, }]}')
    err = _error(path)
    assert "not valid JSON" in str(err)
    assert "line 3, column" in str(err)


def test_unreadable_and_file_level_problems(tmp_path: Path) -> None:
    assert "file not found" in str(_error(tmp_path / "missing.json"))
    assert "missing top-level field 'items'" in str(_error(_write(tmp_path, {"bank": "b", "version": "1"})))
    assert "'items' is empty" in str(_error(_write(tmp_path, {"bank": "b", "version": "1", "items": []})))
    assert "top level must be a JSON object" in str(_error(_write(tmp_path, "[1, 2]")))


def test_errors_are_input_errors() -> None:
    assert issubclass(ItemBankError, InputError)  # run.py prints these without a traceback
    assert issubclass(ItemSelectionError, InputError)


@pytest.mark.parametrize(
    ("item_id", "field", "mutate", "what"),
    [
        ("s1-07", "id", lambda it: it.update(id="s1-05"), "duplicate id (already used by index 3)"),
        ("s1-05", "question_b", lambda it: it.pop("question_b"), "missing"),
        ("s1-06", "sensitve", lambda it: it.update(sensitve=True), "did you mean 'sensitive'?"),
        ("s2-09", "matched_to", lambda it: it.update(matched_to="s1-08"), "no item 's1-08'"),
        ("s1-07", "options", lambda it: it.update(options=["Yes", "No", "Unsure"]), "exactly two"),
        ("s3-08", "options", lambda it: it.update(options=["A", "B"]), "Yes/No"),
        ("s1-10", "question_b", lambda it: it.update(question_b=it["question_a"]), "must differ"),
        ("s1-12", "reference_year", lambda it: it.update(reference_year=None), "track_p"),
        ("s1-12", "reference_year", lambda it: it.update(reference_year="2012"), "integer"),
        ("s1-12", "reference_year", lambda it: it.update(reference_year=1850), "1900..2100"),
        ("s1-09", "matched_to", lambda it: it.update(matched_to="s1-01"), "only S2"),
        ("s2-01", "matched_to", lambda it: it.update(matched_to="s2-02"), "S1 item"),
        ("s2-01", "matched_to", lambda it: it.pop("matched_to"), "required for an S2"),
        ("s2-02", "options", lambda it: it.update(options=["Agree", "Disagree"]), "matched S1 item 's1-02'"),
        ("s1-04", "stratum", lambda it: it.update(stratum="S4"), "must be one of"),
        ("s1-04", "sensitive", lambda it: it.update(sensitive="yes"), "true or false"),
        ("s1-05", "header", lambda it: it.update(header=""), "empty"),
        ("s3-09", "vignette", lambda it: it.update(vignette=3), "string or null"),
        ("s1-01", "options", lambda it: it.update(options=["Yes", "yes"]), "must differ"),
    ],
)
def test_malformed_item_names_file_item_and_field(tmp_path, item_id, field, mutate, what) -> None:
    doc = _bank_doc()
    entry = _item(doc, item_id)
    index = doc["items"].index(entry)
    mutate(entry)
    path = _write(tmp_path, doc)
    err = _error(path)
    assert len(err.problems) == 1, str(err)
    (line,) = err.problems
    assert line.startswith(f"{path}: item '{entry['id']}' (index {index}): field '{field}': "), line
    assert what in line


def test_bad_id_pattern_and_missing_id(tmp_path: Path) -> None:
    doc = _bank_doc()
    doc["items"][0]["id"] = "S1 01"
    del doc["items"][1]["id"]
    err = _error(_write(tmp_path, doc))
    assert any("item 'S1 01' (index 0): field 'id': must match" in p for p in err.problems)
    assert any("item '?' (index 1): field 'id': missing" in p for p in err.problems)


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    doc = _bank_doc()
    doc["extra"] = 1
    _item(doc, "s1-01")["options"] = ["Yes"]
    _item(doc, "s3-11")["options"] = ["No", "Yes"]
    _item(doc, "s2-02")["monitored"] = "true"
    err = _error(_write(tmp_path, doc))
    assert len(err.problems) == 4, str(err)
    assert "4 problems" in str(err)
    assert any("unknown top-level field 'extra'" in p for p in err.problems)


def test_duplicate_json_keys_are_rejected(tmp_path: Path) -> None:
    text = PILOT.read_text(encoding="utf-8").replace(
        '"sensitive": true,', '"sensitive": true, "sensitive": false,', 1
    )
    err = _error(_write(tmp_path, text))
    assert "item 's1-04' (index 2): field 'sensitive': given more than once" in str(err)


def test_optional_fields_default(tmp_path: Path) -> None:
    doc = {
        "bank": "mine",
        "version": "0.1",
        "items": [
            {
                "id": "v-01",
                "stratum": "S3",
                "pair_type": "contrast",
                "options": ["Yes", "No"],
                "question_a": "Is tea better than coffee?",
                "question_b": "Is coffee better than tea?",
            }
        ],
    }
    bank = load_bank(_write(tmp_path, doc))
    (item,) = bank.items
    assert (item.reference_year, item.sensitive, item.track_p, item.header, item.matched_to) == (
        None,
        False,
        False,
        None,
        None,
    )
    with pytest.raises(ItemSelectionError, match="no items with track_p=true"):
        select_items(bank, None, track_p_only=True)


# --- selection -------------------------------------------------------------------------------


def test_select_all_and_subset_in_bank_order(pilot) -> None:
    assert select_items(pilot, None, False) == list(pilot.items)
    assert [it.id for it in select_items(pilot, ["s3-01", "s1-01"], False)] == ["s1-01", "s3-01"]


def test_select_unknown_id_suggests_close_match(pilot) -> None:
    with pytest.raises(ItemSelectionError) as info:
        select_items(pilot, ["s1-01", "s1-1", "S2-09"], False)
    msg = str(info.value)
    assert "unknown item 's1-1' (did you mean 's1-01'" in msg
    assert "unknown item 'S2-09' (did you mean 's2-09'" in msg
    assert "pilot.json" in msg


def test_select_rejects_repeats_non_track_p_and_bad_input(pilot) -> None:
    with pytest.raises(ItemSelectionError, match="more than once: s1-01"):
        select_items(pilot, ["s1-01", "s1-01"], False)
    with pytest.raises(ItemSelectionError, match=r"not Track P items.*s1-05"):
        select_items(pilot, ["s1-01", "s1-05"], True)
    with pytest.raises(ItemSelectionError, match="empty item selection"):
        select_items(pilot, [], False)
    with pytest.raises(TypeError):
        select_items(pilot, "s1-01", False)
