"""An input object's fields: a missing required field and a field nobody declared are each
refused in one line naming where, the field, and (for an unknown one) what is allowed."""

from __future__ import annotations

import pytest

from lmaudit.errors import InputError
from lmaudit.provenance.io import check_fields


def test_declared_fields_pass_with_or_without_the_optional_ones() -> None:
    check_fields({"id": "a", "text": "t"}, "f.jsonl: line 1", ("id", "text"), ("note",))
    check_fields({"id": "a", "text": "t", "note": ""}, "f.jsonl: line 1", ("id", "text"), ("note",))
    check_fields({}, "f.jsonl: line 1", optional=("id",))


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"text": "t"}, "f.jsonl: line 3: missing field(s) ['id']"),
        ({}, "f.jsonl: line 3: missing field(s) ['id', 'text']"),
        (
            {"id": "a", "text": "t", "zeta": 1, "alpha": 2},
            "f.jsonl: line 3: unknown field(s) ['alpha', 'zeta'] (allowed: id, text, note)",
        ),
        ({"id": "a", "zeta": 1}, "f.jsonl: line 3: missing field(s) ['text']"),
    ],
)
def test_a_missing_or_unknown_field_is_one_line_naming_it(obj: dict, message: str) -> None:
    with pytest.raises(InputError) as err:
        check_fields(obj, "f.jsonl: line 3", ("id", "text"), ("note",))
    assert str(err.value) == message
