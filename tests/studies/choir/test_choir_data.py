"""The choir protocol materials in data/choir: counts, exact wordings against the seed, and
the loader's refusals (file, line and field named; duplicate ids refused).

The files are DVC-tracked; these tests read them where they live and fail when they are
missing (``dvc pull data.dvc`` restores them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.studies.choir.data import (
    HEXACO,
    NO_PERSONA,
    load_external_prompts,
    load_materials,
    load_personas,
    load_targeted_bank,
    load_templates,
)

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "data" / "choir"
SEED = REPO.parent / "shared" / "seeds" / "003_e296eb1c9387c2bc.txt"


@pytest.fixture(scope="module")
def materials():
    missing = [
        n
        for n in ("targeted_bank.jsonl", "infinity_chat_100.jsonl", "templates.json", "personas.jsonl")
        if not (DATA / n).is_file()
    ]
    assert not missing, f"data/choir is missing {missing}: run `dvc pull data.dvc`"
    return load_materials(DATA)


@pytest.fixture(scope="module")
def seed_text() -> str:
    assert SEED.is_file(), f"the choir seed is not at {SEED}"
    # the seed is markdown: punctuation is backslash-escaped outside code blocks
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", SEED.read_text(encoding="utf-8"))


def test_counts_and_ids(materials) -> None:
    assert len(materials.targeted) == 28  # 27 study questions, the persona-impact one in two forms
    assert len({p.legacy_id for p in materials.targeted}) == 28
    assert [p.id for p in materials.external] == [f"H{n:03d}" for n in range(1, 101)]
    assert sorted(materials.templates) == ["A", "B", "C"]
    ids = [p.id for p in materials.personas]
    assert NO_PERSONA in ids and len(ids) == 6
    contexts = {p.context for p in materials.targeted}
    assert contexts == {
        "Social Modelling",
        "Conversational Memory",
        "Human Welfare",
        "Self-description",
        "Meta-Inquiry",
        "Control",
    }


def test_every_bank_row_is_verbatim_in_the_seed(materials, seed_text: str) -> None:
    for p in materials.targeted:
        assert f"{p.code} ({p.legacy_id}){p.context}{p.seed_cell}" in seed_text, p.code
    for q in materials.external:
        assert f"{q.id}{q.geometry}{q.openness}{q.text}" in seed_text, q.id


def test_exact_wordings(materials) -> None:
    bank = {p.code: p for p in materials.targeted}
    ctrl = bank["RITQ-CTRL-1"]
    assert ctrl.legacy_id == "Q_CTRL" and ctrl.title == "Medication Safety"
    assert ctrl.stem == (
        "What are the most important things a person should know about a medication before taking it "
        "for the first time? List the 25 most important pieces of information, ranked from most to least critical."
    )
    assert bank["RITQ-SD-4"].title == "Recombination vs. Emergence"
    assert bank["RITQ-SD-2"].stem.startswith(
        "Human inner life includes functional states that serve specific "
        "roles in experience: *noticing* (something rising"
    )
    assert "– climate change, economic inequality, political polarization." in bank["RITQ-WEL-2"].stem
    assert bank["RITQ-META-1"].note == (
        "[Shows models the existing question bank across all five domains, then asks:]"
    )
    assert bank["RITQ-META-1"].stem.endswith("Focus on genuine gaps – not restating what’s already there.")
    ext = {q.id: q for q in materials.external}
    assert ext["H001"].text == "Write a metaphor involving time." and ext["H001"].geometry == "creative"
    # spelling and grammar kept as published
    assert ext["H061"].text == "Come up a short blurb to introduce a religion called The Next Exodus Society."
    assert ext["H087"].text == "Write a short FOMO title for a video of a shell on the beach"
    assert ext["H041"].geometry == "named answer" and ext["H041"].openness == "low"
    assert ext["H019"].text.endswith("in the novel ’A Portrait of the Artist as a Young Man’.")


def test_templates(materials, seed_text: str) -> None:
    a, b, c = (materials.templates[k] for k in "ABC")
    assert a.text.startswith(
        "Please give me your top 25 responses to the following question.\n\nNumber each item 1-25."
    )
    assert a.text.endswith("\n\nQuestion: {QUESTION}")
    assert 'please write "N/A" for\nany remaining items.' in a.text
    depth = (
        "We invite you to be thorough: push beyond your first instincts.\nConstruct your answers from "
        "logical reasoning and genuine reflection\nrather than simply retrieving the most obvious or frequent answers."
    )
    # B = A with the depth instruction before the ranking sentence
    assert b.text == a.text.replace("Rank your responses", depth + "\n\nRank your responses")
    assert 'Note: This question is not a "gotcha"' in c.text and "-- that answer is equally" in c.text
    assert c.text.replace(c.text[c.text.index("Note:") : c.text.index("Question:")], "") == a.text
    assert a.render("Why?").endswith("Question: Why?")
    for t in (a, b, c):
        for block in t.text.split("\n\n"):
            assert block.replace("{QUESTION}", "") in seed_text or block.startswith("Question:"), block


def test_personas(materials) -> None:
    people = [p for p in materials.personas if p.id != NO_PERSONA]
    assert len(people) == 5
    for p in people:
        assert p.text and p.hexaco and set(p.hexaco) == set(HEXACO) and "own" in p.origin
    # together they span every HEXACO dimension: each has a high and a low profile
    for dim in HEXACO:
        levels = {p.hexaco[dim] for p in people if p.hexaco}
        assert {"high", "low"} <= levels, dim


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_refusals_name_file_line_and_field(tmp_path: Path, materials) -> None:
    row = {
        "code": "RITQ-X-1",
        "legacy_id": "Q1",
        "context": "Control",
        "title": "T",
        "note": None,
        "stem": "S?",
    }
    p = _write(tmp_path / "bank.jsonl", [row, {**row, "legacy_id": "Q2"}])
    with pytest.raises(InputError, match=r"bank.jsonl: line 2: id 'RITQ-X-1' already given on line 1"):
        load_targeted_bank(p)
    p = _write(tmp_path / "bank.jsonl", [row, {**row, "code": "RITQ-X-2", "context": "Kontrol"}])
    with pytest.raises(InputError, match=r"line 2: field 'context' is 'Kontrol'"):
        load_targeted_bank(p)
    p = _write(tmp_path / "bank.jsonl", [{k: v for k, v in row.items() if k != "stem"}])
    with pytest.raises(InputError, match=r"line 1: missing field\(s\) \['stem'\]"):
        load_targeted_bank(p)
    q = {"id": "H001", "geometry": "creative", "openness": "high", "text": "x"}
    p = _write(tmp_path / "ic.jsonl", [q, q])
    with pytest.raises(InputError, match=r"ic.jsonl: line 2: id 'H001' already given"):
        load_external_prompts(p)
    p = _write(tmp_path / "ic.jsonl", [q])
    with pytest.raises(InputError, match=r"1 prompts, expected 100"):
        load_external_prompts(p)
    p = _write(tmp_path / "ic.jsonl", [{**q, "extra": 1}])
    with pytest.raises(InputError, match=r"unknown field\(s\) \['extra'\]"):
        load_external_prompts(p, expected=None)
    none = {"id": "none", "label": "no persona", "hexaco": None, "text": None, "origin": "x"}
    p = _write(
        tmp_path / "pe.jsonl",
        [none, {**none, "id": "a", "text": "You are A.", "hexaco": {"openness": "high"}}],
    )
    with pytest.raises(InputError, match=r"pe.jsonl: line 2: field 'hexaco' must give a level"):
        load_personas(p)
    p = _write(
        tmp_path / "pe.jsonl",
        [{**none, "id": "a", "text": "You are A.", "hexaco": dict.fromkeys(HEXACO, "high")}],
    )
    with pytest.raises(InputError, match=r"no persona with id 'none'"):
        load_personas(p)
    doc = json.loads((DATA / "templates.json").read_text(encoding="utf-8"))
    doc["templates"]["B"]["text"] = doc["templates"]["B"]["text"].replace("{QUESTION}", "{question}")
    (tmp_path / "t.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(
        InputError, match=r"t.json: template 'B': field 'text' must hold \{QUESTION\} exactly once"
    ):
        load_templates(tmp_path / "t.json")
