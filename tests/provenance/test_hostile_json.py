"""JSON nested far past any real input, and strings holding a lone UTF-16 surrogate, are refused
in one line naming the file, the line and where (column or field), by every reader: the shared
ones (:func:`read_json`, :func:`iter_jsonl`), the qq item bank, lm-eval samples and results
files, AlpacaEval annotations, the sniffing of an import, a measurement file's source, the
response cache and a server's answer. Python's decoder accepts ``"\\ud800"`` and recurses once a
level; both used to escape as a traceback (RecursionError) or a later UnicodeEncodeError."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_runs import assert_nothing_half_written, error_line, run_cli
from lmaudit.errors import InputError, InvalidEntry, StrictJsonError
from lmaudit.interop.alpaca_eval import read_annotations
from lmaudit.interop.detect import sniff
from lmaudit.interop.lm_eval_samples import read_samples
from lmaudit.pipeline.measured import source_of
from lmaudit.provenance import jsoncheck
from lmaudit.provenance.cache import parse_entry
from lmaudit.provenance.io import iter_jsonl, read_json
from lmaudit.provenance.jsoncheck import strict_loads
from lmaudit.studies.qq.items import load_bank

REPO = Path(__file__).resolve().parents[2]
DEEP = 100_000
SAMPLES = "samples_colours_2024-01-01T00-00-00.000000.jsonl"


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def lone_surrogate_free(value: object) -> bool:
    """Independent check: every string of a decoded value can be written as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- the shared decoder ---------------------------------------------------------------------------


def test_nesting_is_read_up_to_the_bound_and_refused_past_it_naming_the_column() -> None:
    bound = jsoncheck.MAX_JSON_DEPTH
    assert jsoncheck.bounded_loads(nested(bound)) == json.loads(nested(bound))
    # one level past the bound: the bracket that opens it is named (column MAX + 1)
    for text in (nested(bound + 1), nested(DEEP)):
        with pytest.raises(StrictJsonError, match=rf"nested more than {bound} deep \(at column 257\)"):
            jsoncheck.bounded_loads(text)
        with pytest.raises(StrictJsonError, match="nested more than"):
            strict_loads(text)
    # objects count as levels too; brackets inside strings do not
    deep_objects = '{"a": ' * DEEP + "1" + "}" * DEEP
    with pytest.raises(StrictJsonError, match=r"at column 1537\)"):  # 256 * len('{"a": ') + 1
        strict_loads(deep_objects)
    assert strict_loads(json.dumps(["[" * 1000, "{" * 1000])) == ["[" * 1000, "{" * 1000]
    # a multi-line document: line and column
    with pytest.raises(StrictJsonError, match=r"at line 3, column 256\)"):
        strict_loads('{"a": 1,\n "b":\n' + nested(DEEP) + "}")


def test_strict_decoding_refused_early_still_bounds_the_second_pass() -> None:
    # a key given twice before the deep part: the first pass stops there, the second one reads on
    with pytest.raises(StrictJsonError, match="nested more than"):
        strict_loads('[{"a": 1, "a": 2}, ' + nested(DEEP) + "]")
    # a refused number deep inside (but within the bound) is still named by its path
    with pytest.raises(StrictJsonError, match=r"field '\[0\]\[0\]\[0\]' is NaN"):
        strict_loads(nested(3, "NaN"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"a": [1,\n {"b": "x\\ud800y"}]}',
            r"^field 'a\[1\]\.b' holds a lone UTF-16 surrogate \('\\ud800' at character 2\)",
        ),
        ('"\\udc00"', r"^the top-level value holds a lone UTF-16 surrogate \('\\udc00'"),
        (
            '["ok", "\\udc00\\ud800"]',
            r"^field '\[1\]' holds a lone UTF-16 surrogate \('\\udc00' at character 1\)",
        ),
        ('{"k\\uDBFF": 1}', r"^key 'k\\udbff' holds a lone UTF-16 surrogate"),
        ('{"x": {"\\ud800": 1}}', r"^key '\\ud800' in 'x' holds a lone UTF-16 surrogate"),
    ],
)
def test_lone_surrogates_are_refused_naming_the_field(text: str, message: str) -> None:
    assert not lone_surrogate_free(json.loads(text))  # what Python's decoder lets through
    for loads in (jsoncheck.bounded_loads, strict_loads):
        with pytest.raises(StrictJsonError, match=message):
            loads(text)


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud83d\\ude00"',  # a surrogate pair: one character
        '"\\\\ud800"',  # an escaped backslash, then the letters
        '{"a": "\\\\\\ud83d\\ude00\\\\udc00"}',
        '"plain text, \u00e9\u4e2d"',
    ],
)
def test_text_that_only_looks_like_a_lone_surrogate_is_read(text: str) -> None:
    assert lone_surrogate_free(json.loads(text))
    assert jsoncheck.bounded_loads(text) == strict_loads(text) == json.loads(text)


# code units that make lone surrogates, pairs, escaped backslashes and ordinary text
UNITS = st.sampled_from(
    ["a", "\u00e9", "\u4e2d", "\\", '"', "\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(units=st.lists(UNITS, max_size=12), ascii_only=st.booleans(), as_key=st.booleans())
def test_a_value_is_refused_exactly_when_it_decodes_to_text_utf8_cannot_hold(
    units: list[str], ascii_only: bool, as_key: bool
) -> None:
    # json.dumps writes each surrogate as a \\uXXXX escape (or, ensure_ascii=False, as it is);
    # Python's decoder pairs a high escape followed by a low one, and nothing else
    s = "".join(units)
    doc = {s: 1} if as_key else ["x", {"k": s}]
    text = json.dumps(doc, ensure_ascii=ascii_only)
    expected_refused = not lone_surrogate_free(json.loads(text))
    try:
        jsoncheck.bounded_loads(text)
    except StrictJsonError as e:
        assert expected_refused, text
        assert "lone UTF-16 surrogate" in str(e)
        assert e.where == ("" if as_key else "[1].k")
    else:
        assert not expected_refused, text


# --- every reader -----------------------------------------------------------------------------------

DEEP_LINE = '{"family": "f", "draws": ' + nested(DEEP) + "}"
LONE_LINE = '{"family": "f", "draws": ["a", "b\\ud800"]}'


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (DEEP_LINE, r"arrays and objects nested more than 256 deep \(at column 281\)"),
        (LONE_LINE, r"field 'draws\[1\]' holds a lone"),
    ],
    ids=["deep", "lone"],
)
def test_the_shared_readers_name_file_and_line(tmp_path: Path, line: str, said: str) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"family": "f", "draws": ["a"]}\n' + line + "\n")
    with pytest.raises(InputError, match=rf"^{rows}: line 2: {said}"):
        list(iter_jsonl(rows))
    doc = tmp_path / "doc.json"
    doc.write_text(line)
    with pytest.raises(InputError, match=rf"^{doc}: {said}"):
        read_json(doc)


def test_an_item_bank_names_the_bank_and_the_field(tmp_path: Path) -> None:
    bank = tmp_path / "bank.json"
    bank.write_text('{"bank": "b", "version": "1",\n "items": ' + nested(DEEP, "{}") + "}")
    with pytest.raises(
        InputError, match=rf"{bank}: arrays and objects nested more than 256 deep \(at line 2"
    ):
        load_bank(bank)
    bank.write_text('{"bank": "b\\udfff", "version": "1", "items": []}')
    with pytest.raises(InputError, match=rf"{bank}: field 'bank' holds a lone UTF-16 surrogate"):
        load_bank(bank)


def _lm_eval_line(**fields: object) -> str:
    line = {"doc_id": 0, "doc_hash": "h0", "resps": [["red", "blue"]], "filter": "none", **fields}
    return json.dumps(line)


def test_lm_eval_samples_and_results_name_file_and_line(tmp_path: Path) -> None:
    pytest.importorskip("lm_eval")
    samples = tmp_path / SAMPLES
    samples.write_text(
        _lm_eval_line() + "\n" + _lm_eval_line(doc_id=1)[:-1] + ', "doc": ' + nested(DEEP) + "}\n"
    )
    with pytest.raises(InputError, match=rf"^{samples}: line 2: arrays and objects nested more than 256"):
        read_samples(samples, SAMPLES)
    samples.write_text(_lm_eval_line()[:-1] + ', "doc": {"q": "\\ud800"}}\n')
    with pytest.raises(InputError, match=rf"^{samples}: line 1: field 'doc.q' holds a lone UTF-16 surrogate"):
        read_samples(samples, SAMPLES)
    samples.write_text(_lm_eval_line() + "\n")
    results = tmp_path / "results_2024-01-01T00-00-00.000000.json"
    results.write_text('{"model_name": "m", "config": ' + nested(DEEP, "{}") + "}")
    with pytest.raises(InputError, match=rf"^{results}: arrays and objects nested more than 256"):
        read_samples(samples, SAMPLES)
    results.write_text('{"model_name": "m\\ud800", "config": {}}')
    with pytest.raises(InputError, match=rf"^{results}: field 'model_name' holds a lone UTF-16 surrogate"):
        read_samples(samples, SAMPLES)


def test_alpaca_eval_annotations_name_the_file(tmp_path: Path) -> None:
    ann = tmp_path / "annotations.json"
    ann.write_text('[{"instruction": "i",\n "output_1": ' + nested(DEEP, '"x"') + "}]")
    with pytest.raises(
        InputError, match=rf"^{ann}: arrays and objects nested more than 256 deep \(at line 2"
    ):
        read_annotations(ann)
    ann.write_text('[{"instruction": "i", "output_1": "\\ud800"}]')
    with pytest.raises(InputError, match=rf"^{ann}: field '\[0\]\.output_1' holds a lone UTF-16 surrogate"):
        read_annotations(ann)


def test_choirs_echo_calibration_file_names_file_and_line(tmp_path: Path) -> None:
    from lmaudit.studies.choir.echo import load_calibration

    row = {"set": "s", "question": "Name a fruit.", "phrase": "apple", "echo": False}
    cal = tmp_path / "calibration.jsonl"
    cal.write_text(json.dumps(row) + "\n" + '{"set": "s", "phrase": ' + nested(DEEP, '"x"') + "}\n")
    with pytest.raises(InputError, match=rf"^{cal}: line 2: arrays and objects nested more than 256 deep"):
        load_calibration(cal)
    cal.write_text(json.dumps(row) + "\n" + json.dumps(row).replace('"apple"', '"app\\udc80le"') + "\n")
    with pytest.raises(InputError, match=rf"^{cal}: line 2: field 'phrase' holds a lone UTF-16 surrogate"):
        load_calibration(cal)


def test_sniffing_an_import_and_naming_a_measurement_file_do_not_crash(tmp_path: Path) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text(DEEP_LINE + "\n")
    assert sniff(deep) == ("unknown", "a JSON object whose first field is 'family'")
    assert source_of(deep) == "deep"  # the file's name: its first record is not read as JSON


def test_a_cache_entry_or_a_server_error_body_nested_too_deep_is_refused() -> None:
    from lmaudit.backends.openai.wire import server_message

    with pytest.raises(InvalidEntry, match="nested more than 256"):
        parse_entry(('{"key": "k", "value": ' + nested(DEEP) + "}").encode(), "k")
    with pytest.raises(InvalidEntry, match="field 'value' holds a lone UTF-16 surrogate"):
        parse_entry(b'{"key": "k", "value": "\\ud800"}', "k")
    assert server_message(nested(DEEP), "Bad Gateway") == nested(DEEP)[:500]


# --- through run.py ---------------------------------------------------------------------------------


def _run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        f"out_dir={tmp_path / 'run'}",
        f"paths.cache={tmp_path / 'cache'}",
        "mlflow.enabled=false",
        "progress=false",
        *overrides,
    )


def _refused(proc: subprocess.CompletedProcess[str], run_dir: Path) -> str:
    assert proc.returncode == 2, proc.stderr
    line = error_line(proc)
    # the plan stage may have finished; nothing was measured, analysed or left half-written
    assert_nothing_half_written(run_dir, "report.html")
    return line


def test_a_draws_import_nested_too_deep_ends_in_one_line_exit_2(tmp_path: Path) -> None:
    rows = tmp_path / "import.jsonl"
    rows.write_text(
        (REPO / "data/draws/example_import.jsonl").read_text().splitlines()[0] + "\n" + DEEP_LINE + "\n"
    )
    line = _refused(_run(tmp_path, "study=draws", f"study.import_path={rows}"), tmp_path / "run")
    assert line.startswith(f"error: {rows}: line 2: arrays and objects nested more than 256 deep")


def test_a_draws_import_with_a_lone_surrogate_ends_in_one_line_exit_2(tmp_path: Path) -> None:
    rows = tmp_path / "import.jsonl"
    first = json.loads((REPO / "data/draws/example_import.jsonl").read_text().splitlines()[0])
    lone = json.dumps({**first, "probe": "p01"}).replace('"p01"', '"p\\ud800"')
    rows.write_text(json.dumps(first) + "\n" + lone + "\n")
    line = _refused(_run(tmp_path, "study=draws", f"study.import_path={rows}"), tmp_path / "run")
    assert (
        line
        == f"error: {rows}: line 2: field 'probe' holds a lone UTF-16 surrogate ('\\ud800' at character 2), which is not text"
    )
