"""The import format: validation errors name the file, line and field; exclusion; prefix de-duplication."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lmaudit.errors import InputError
from lmaudit.studies.draws.importer import SequenceRecord, dedup_prefixes, exclude, read_import

GOOD = {"family": "m", "source": "e1", "condition": "c", "probe": "p", "draws": ["A", "B", "A"]}


def _write(tmp_path: Path, *rows: Any) -> Path:
    path = tmp_path / "draws.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_a_good_file_reads_with_line_numbers(tmp_path: Path) -> None:
    rows = read_import(_write(tmp_path, GOOD, "", {**GOOD, "draws": [1, 2, 2], "raw": ["1", "2", "2"]}))
    assert [r["line"] for r in rows] == [1, 3] and all(r["kind"] == "sequence" for r in rows)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({k: v for k, v in GOOD.items() if k != "family"}, r"line 2: missing field 'family'"),
        ({k: v for k, v in GOOD.items() if k != "draws"}, r"line 2: missing field 'draws'"),
        ({**GOOD, "draws": []}, r"line 2: field 'draws' is empty"),
        (
            {**GOOD, "draws": ["A", 1, "B"]},
            r"line 2: field 'draws' mixes answer types \(string at draws\[0\], integer at draws\[1\]\)",
        ),
        ({**GOOD, "draws": ["A", None]}, r"line 2: field 'draws\[1\]' must be a string or an integer"),
        ({**GOOD, "draws": [True, False]}, r"line 2: field 'draws\[0\]' must be a string or an integer"),
        ({**GOOD, "draws": "ABA"}, r"line 2: field 'draws' must be a list"),
        ({**GOOD, "probe": ""}, r"line 2: field 'probe' must be a non-empty string"),
        ({**GOOD, "source": 3}, r"line 2: field 'source' must be a non-empty string"),
        ({**GOOD, "raw": ["a"]}, r"line 2: field 'raw' must be a list of 3 strings"),
        ({**GOOD, "replicate": -1}, r"line 2: field 'replicate' must be an integer >= 0"),
        ({**GOOD, "draw": ["A"]}, r"line 2: unknown field\(s\) \['draw'\]"),
        ("[1, 2]", r"line 2: expected a JSON object"),
        ("{not json", r"line 2: not valid JSON"),
    ],
)
def test_bad_records_name_the_line_and_field(tmp_path: Path, bad: Any, match: str) -> None:
    path = _write(tmp_path, GOOD, bad)
    with pytest.raises(InputError, match=match) as err:
        read_import(path)
    assert str(path) in str(err.value)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no sequences"):
        read_import(_write(tmp_path, ""))
    with pytest.raises(InputError, match="file not found"):
        read_import(tmp_path / "nope.jsonl")


def _rec(
    draws: str, family: str = "m", condition: str = "c", probe: str = "p", rep: int | None = None
) -> SequenceRecord:
    return SequenceRecord(family, "s", condition, probe, tuple(draws), rep)


def test_exclusion_patterns_match_conditions() -> None:
    recs = [_rec("AB", condition=c) for c in ("pred-1", "claim-x", "baseline", "predicted", "xpred-1")]
    kept, dropped = exclude(recs, ["pred-*", "claim-*"])
    assert [r.condition for r in kept] == ["baseline", "predicted", "xpred-1"]
    assert dropped == {"pred-*": 1, "claim-*": 1}


def test_prefix_duplicates_are_dropped_and_the_longer_kept() -> None:
    recs = [
        _rec("ABAB"),  # prefix of the next one: dropped
        _rec("ABABBA"),  # kept
        _rec("ABABBA"),  # equal to a kept one: dropped (the first of equals is kept)
        _rec("BA"),  # not a prefix: kept
        _rec("AB", probe="q"),  # other probe: kept
        _rec("AB", condition="d"),  # other condition: kept
        _rec("AB", family="other"),  # other family: kept
        _rec("ABA", rep=1),  # a declared replicate: its own key, kept
        _rec("ABA", rep=1),  # ... but its equal copy is dropped
    ]
    kept, dropped = dedup_prefixes(recs)
    assert [r.draws for r in dropped] == [tuple("ABAB"), tuple("ABABBA"), tuple("ABA")]
    assert len(kept) == 6 and kept[0].draws == tuple("ABABBA")
    assert [r.draws for r in kept] == [tuple(x) for x in ("ABABBA", "BA", "AB", "AB", "AB", "ABA")]


def test_integer_answers_never_match_string_answers() -> None:
    a = SequenceRecord("m", "s", "c", "p", (1, 2), None)
    b = SequenceRecord("m", "s", "c", "p", ("1", "2", "3"), None)
    kept, dropped = dedup_prefixes([a, b])
    assert len(kept) == 2 and not dropped


def test_prefix_dropping_matches_its_definition_on_random_records() -> None:
    """Dropped exactly when equal to or a prefix of a kept sequence of its key, the longer (and
    of equals the first) kept: against the definition, sequence by sequence."""
    import random

    rng = random.Random(5)
    for _ in range(300):
        recs = [
            _rec("".join(rng.choice("AB") for _ in range(rng.randint(1, 5))), probe=rng.choice("pq"))
            for _ in range(rng.randint(1, 12))
        ]
        order = sorted(range(len(recs)), key=lambda i: (-len(recs[i].draws), i))
        kept_ids: list[int] = []
        for i in order:
            d = recs[i].draws
            if not any(recs[k].key == recs[i].key and recs[k].draws[: len(d)] == d for k in kept_ids):
                kept_ids.append(i)
        kept, dropped = dedup_prefixes(recs)
        assert kept == [recs[i] for i in sorted(kept_ids)]
        assert dropped == [r for i, r in enumerate(recs) if i not in kept_ids]
