"""Lists recorded elsewhere: the import path analyses them with no model loaded, exactly as the
same lists elicited here; bad records are refused with file, line and field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from choir_quick import typed_results
from lmaudit.errors import InputError
from lmaudit.pipeline import run

COMMON = (
    "study.question_ids=[H001,H002]",
    "study.templates=[A]",
    "study.personas=[archivist]",
    "study.generations=3",
    "study.embedder.kind=sim",
    "study.shuffles=100",
    "study.permutations=100",
    "study.n_boot=100",
    "study.n_null=50",
    "mlflow.enabled=false",
)
ENSEMBLE = (
    "study.ensemble.members=[{backend: sim, name: m1, agent: freelist, params: {signature: 1}},"
    "{backend: sim, name: m2, agent: freelist, params: {signature: 2}}]"
)


#: one imported list, valid as it is
RECORD = {
    "model": "m",
    "question": "H001",
    "template": "A",
    "temperature": 0.7,
    "persona": "none",
    "generation": 0,
    "items": ["alpha"],
}


def _json(p: Path) -> Any:
    return json.loads(p.read_text())


def test_imported_lists_give_the_elicited_analysis(make_cfg, tmp_path):
    run(make_cfg("study=choir", ENSEMBLE, *COMMON, name="elicited"))
    rows = [json.loads(x) for x in (tmp_path / "elicited/measurements.jsonl").read_text().splitlines()]
    lists = [r for r in rows if r["kind"] == "list"]
    # export half as raw text (extracted again on import) and half as already-extracted items
    out = []
    for i, r in enumerate(lists):
        rec = {k: r[k] for k in ("model", "question", "template", "temperature", "persona", "generation")}
        if i % 2:
            rec["raw"] = r["raw"]
        else:
            rec["items"] = [{"text": it["text"], "justification": it["justification"]} for it in r["items"]]
        out.append(rec)
    path = tmp_path / "lists.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in out))
    run(make_cfg("study=choir", f"study.import_path={path}", *COMMON, name="imported"))
    a, b = _json(tmp_path / "elicited/results.json"), typed_results(tmp_path / "imported/results.json")
    for key in ("questions", "summary", "width_bins", "recoverability", "design"):
        assert a[key] == b[key], key
    audit = _json(tmp_path / "imported/audit_record.json")
    assert audit["measure"]["backend"] is None and audit["measure"]["imported"] is True
    assert audit["measure"]["ensemble"] == []


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"temperature": -1}, "line 1: field 'temperature' must be a number >= 0"),
        ({"persona": "pirate"}, "line 1: field 'persona' = 'pirate' is not a persona profile"),
        ({"question": "Z999"}, "line 1: field 'question' = 'Z999' is not in the infinity bank"),
        ({"items": [{"nope": 1}]}, "line 1: field 'items[0]' must be a non-empty string"),
        ({"extra": 1}, "line 1: unknown field(s) ['extra']"),
        ({"raw": "1. a", "items": ["a"]}, "line 1: give either 'raw' or 'items'"),
    ],
)
def test_bad_records_are_refused_naming_line_and_field(make_cfg, tmp_path, record, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({**RECORD, **record}) + "\n")
    with pytest.raises(
        InputError,
        match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)"),
    ):
        run(make_cfg("study=choir", f"study.import_path={path}", *COMMON, name="bad"))


def test_a_list_given_twice_is_refused(make_cfg, tmp_path):
    path = tmp_path / "twice.jsonl"
    path.write_text(json.dumps(RECORD) + "\n" + json.dumps(RECORD) + "\n")
    with pytest.raises(InputError, match="line 2: a second list for model m"):
        run(make_cfg("study=choir", f"study.import_path={path}", *COMMON, name="twice"))


@pytest.mark.parametrize(
    ("first", "second", "said"),
    [
        ("What lasts?", "What endures?", "line 1: its 'question_text' is 'What lasts?', {path}: line 2: its"),
        (None, "What endures?", "line 1: the infinity bank's text is"),
    ],
)
def test_one_question_with_two_texts_is_refused_naming_both_lines(make_cfg, tmp_path, first, second, said):
    one = RECORD | ({"question_text": first} if first else {})
    two = {**RECORD, "generation": 1, "question_text": second}
    path = tmp_path / "texts.jsonl"
    path.write_text(json.dumps(one) + "\n" + json.dumps(two) + "\n")
    with pytest.raises(InputError) as e:
        run(make_cfg("study=choir", f"study.import_path={path}", *COMMON, name="texts"))
    assert str(e.value).startswith("question 'H001' has two texts: ")
    assert said.format(path=path) in str(e.value) and str(e.value).endswith("is 'What endures?'")


def test_imported_lists_may_bring_their_own_persona_profiles(make_cfg, tmp_path):
    """Lists conditioned on profiles other than ours: refused without their texts, analysed with
    them (study.profiles_path), and the leakage check reads those texts."""
    run(make_cfg("study=choir", ENSEMBLE, *COMMON, name="elicited"))
    rows = [json.loads(x) for x in (tmp_path / "elicited/measurements.jsonl").read_text().splitlines()]
    out = []
    for r in (r for r in rows if r["kind"] == "list"):
        rec = {k: r[k] for k in ("model", "question", "template", "temperature", "generation", "raw")}
        rec["persona"] = "seed_p1" if r["persona"] != "none" else "none"
        out.append(rec)
    path = tmp_path / "lists.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in out))
    with pytest.raises(InputError, match=r"line \d+: field 'persona' = 'seed_p1' .*study.profiles_path"):
        run(make_cfg("study=choir", f"study.import_path={path}", *COMMON, name="refused"))
    first_item = next(r["items"][0]["text"] for r in rows if r["kind"] == "list" and r["persona"] != "none")
    profiles = tmp_path / "profiles.jsonl"
    profiles.write_text(
        json.dumps({"id": "seed_p1", "text": f"A profile that mentions {first_item}."}) + "\n"
    )
    run(
        make_cfg(
            "study=choir", f"study.import_path={path}", f"study.profiles_path={profiles}", *COMMON, name="own"
        )
    )
    res = typed_results(tmp_path / "own/results.json")
    assert res["design"]["conditions"] == ["A", "A|seed_p1"]
    leak = res["leakage"]
    assert leak is not None and set(leak["model_leakage"]) == {"m1", "m2"}
    vocab = [json.loads(x) for x in (tmp_path / "own/measurements.jsonl").read_text().splitlines()]
    terms = next(r["terms"] for r in vocab if r["kind"] == "profile_vocabulary")
    assert "profile" in terms and "mentions" in terms


def test_ids_with_dollar_signs_are_drawn_as_written(make_cfg, tmp_path):
    """Question ids come from the import as written: `$...$` is text, never TeX (matplotlib's
    mathtext would fail on "$x^{$" and turn "cost $5 or $10" into math)."""
    ids = ("cost $5 or $10", "$x^{$ broken", "$\\alpha$")
    words = ("bread", "salt", "water", "lamp", "rope", "tent")
    recs = [
        {
            **RECORD,
            "model": model,
            "question": q,
            "question_text": f"Name things: {q}",
            "generation": g,
            "items": list(words[(g + k) % 6 : (g + k) % 6 + 3]),
        }
        for k, q in enumerate(ids)
        for model in ("m1", "m2")
        for g in range(3)
    ]
    path = tmp_path / "lists.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run(make_cfg("study=choir", f"study.import_path={path}", *COMMON[4:], name="dollars"))
    html = (tmp_path / "dollars" / "report.html").read_text()
    figures = "".join(re.findall(r"<svg.*?</svg>", html, flags=re.S))
    drawn = {m for m in re.findall(r">([^<>]*)</text>", figures)}
    for q in ids:  # each id labels its point, exactly as written (XML-escaped, no mathtext)
        assert q in drawn, q
