"""Imports and measurement files refuse what JSON lets through silently: keys given twice
(the last would win), NaN and Infinity (and numbers too large for a float), probabilities
given as strings or booleans, and metric keys two families would share. Every refusal
names the file, the line of a JSON Lines record, and the key or field by its JSON path. Real files throughout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmaudit.errors import InputError, StrictJsonError
from lmaudit.provenance.io import iter_jsonl, read_json
from lmaudit.provenance.jsoncheck import strict_loads
from lmaudit.studies.draws import importer as draws_import
from lmaudit.studies.draws.analysis import analyze_records, check_metric_keys, metric_key
from lmaudit.studies.draws.family import AnalysisParams
from lmaudit.studies.draws.importer import SequenceRecord
from lmaudit.studies.judge import importer as judge_import
from lmaudit.studies.judge.packets import Condition

# --- the shared readers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ('{"a": 1,\n "a": 2}', "", "^key 'a' given more than once$"),
        ('{"x": {"k": 1, "k": 1}}', "x", "^key 'k' given more than once in 'x'$"),
        ('[{"ok": 1},\n {"confidence": NaN}]', "[1].confidence", r"^field '\[1\]\.confidence' is NaN, not"),
        ('{"p": 0.5,\n\n "q": Infinity}', "q", "^field 'q' is Infinity, not a finite number$"),
        ('{"p": [0.1,\n -Infinity]}', "p[1]", r"^field 'p\[1\]' is -Infinity"),
        ('{"p": 1e999}', "p", "^field 'p' is 1e999"),
        ('{"r": [{"w": "A", "w": "B"}]}', "r[0]", r"^key 'w' given more than once in 'r\[0\]'$"),
        ("[1,\n NaN]", "[1]", r"^field '\[1\]' is NaN"),
        ("NaN", "", "^the top-level value is NaN"),
        # the first problem in the text is the one named
        ('{"a": {"b": NaN}, "a": 1}', "a.b", "^field 'a.b' is NaN"),
        ('{"a": 1, "a": {"b": NaN}}', "", "^key 'a' given more than once$"),
    ],
)
def test_strict_loads_names_the_key_or_field_by_its_path(text: str, where: str, message: str) -> None:
    with pytest.raises(StrictJsonError, match=message) as info:
        strict_loads(text)
    assert info.value.where == where


def test_strict_loads_accepts_ordinary_json() -> None:
    text = '{"a": [1, 2.5, -3e-7, {"b": null, "c": true}], "d": "NaN", "e": {}, "f": 1e308, "g": -0.0}'
    assert strict_loads(text) == json.loads(text)
    assert strict_loads("[]") == [] and strict_loads('"Infinity"') == "Infinity"


def test_strict_loads_reports_syntax_errors_as_json_does() -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        strict_loads('{"a": 1,\n "b": }')
    assert (info.value.lineno, info.value.colno) == (2, 7)
    with pytest.raises(json.JSONDecodeError):  # refused early, but invalid later: the syntax error
        strict_loads('{"a": NaN, "b": }')


def test_read_json_and_iter_jsonl_refuse_with_file_and_line(tmp_path: Path) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text('{\n  "winner": "A",\n  "winner": "B"\n}\n')
    with pytest.raises(InputError, match=rf"{doc}: key 'winner' given more than once$"):
        read_json(doc)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"a": 1}\n\n{"a": 2, "b": NaN}\n')
    with pytest.raises(InputError, match=rf"{rows}: line 3: field 'b' is NaN, not a finite number"):
        list(iter_jsonl(rows))
    raw = tmp_path / "bytes.jsonl"
    raw.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(InputError, match=rf"{raw}: line 2: not UTF-8"):
        list(iter_jsonl(raw))


# --- judge import ------------------------------------------------------------------------------


def test_judge_import_refuses_nan_confidence(tmp_path: Path) -> None:
    (tmp_path / "results_P0.json").write_text(
        '[{"prompt_id": "P001", "winner": "A", "confidence": 0.9, "reason": null},\n'
        ' {"prompt_id": "P002", "winner": "B", "confidence": NaN, "reason": null}]\n'
    )
    with pytest.raises(InputError, match=r"results_P0\.json: field '\[1\]\.confidence' is NaN"):
        judge_import.read_import(tmp_path, [Condition("P0", frozenset())])


def test_judge_import_refuses_duplicate_key(tmp_path: Path) -> None:
    (tmp_path / "results_P0.json").write_text(
        '{"results": [\n {"prompt_id": "P001", "winner": "A", "winner": "B", "confidence": 0.5, "reason": null}\n]}'
    )
    with pytest.raises(InputError, match=r"key 'winner' given more than once in 'results\[0\]'"):
        judge_import.read_import(tmp_path, [Condition("P0", frozenset())])


# --- draws import ------------------------------------------------------------------------------

LINE = {"family": "f", "source": "s", "condition": "c", "probe": "p1", "draws": ["A", "B"]}


def test_draws_import_refuses_duplicate_key(tmp_path: Path) -> None:
    path = tmp_path / "draws.jsonl"
    path.write_text(
        json.dumps(LINE) + "\n" + '{"family": "f", "source": "s", "condition": "c", "probe": "p2", '
        '"draws": ["A"], "draws": ["B", "B"]}\n'
    )
    with pytest.raises(InputError, match=rf"{path}: line 2: key 'draws' given more than once"):
        draws_import.read_import(path)


def test_draws_metric_keys_are_injective() -> None:
    assert metric_key("gpt-oss:120b") == "gpt-oss_120b"  # unchanged for existing names
    assert metric_key("qwen3 4b/v1.2_x") == "qwen3 4b/v1.2_x"
    check_metric_keys(["a<b", "a-b", "a.b"])
    with pytest.raises(InputError, match=r"field 'family'.*'a<b', 'a>b' -> 'a_b'"):
        check_metric_keys(["a<b", "a>b", "other"])
    with pytest.raises(InputError, match=r"'a<b', 'a_b' -> 'a_b'"):
        check_metric_keys(["a_b", "a<b"])
    recs = [
        SequenceRecord(fam, "s", "c", f"p{i}", ("A", "B", "A"), None)
        for fam in ("a<b", "a>b")
        for i in range(3)
    ]
    params = AnalysisParams(n_perm=9, rho_grid=(0.0, 0.5), n_sims=2, power_rhos=())
    with pytest.raises(InputError, match="would share a metric key"):
        analyze_records(recs, params, exclude_patterns=[])
