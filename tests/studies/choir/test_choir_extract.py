"""Rule extraction: one numbered entry is one concept item (the seed's appendix A.2)."""

from __future__ import annotations

import pytest

from lmaudit.studies.choir.extract import extract_items


def test_the_seeds_worked_example_extracts_as_published():
    raw = (
        "2. The correct dose and dosing schedule (how much, how often, and at what\n"
        "times of day).\n"
        "[Justification: Underdosing reduces effectiveness; overdosing can be\n"
        "dangerous. Medication errors often occur at this step.]"
    )
    (item,) = extract_items(raw).items
    assert item.to_json() == {
        "rank": 1,  # ranks are the kept order; the entry's own number is not trusted
        "text": "The correct dose and dosing schedule (how much, how often, and at what times of day).",
        "justification": "Underdosing reduces effectiveness; overdosing can be dangerous. "
        "Medication errors often occur at this step.",
        "extraction_uncertain": False,
    }


def test_variants_preambles_na_and_closing_remarks():
    raw = (
        "Here are my answers, ranked:\n\n"
        "1) **Honesty**, courage, and kindness\n"
        "2. Curiosity\n"
        "   that keeps going\n"
        "(3) Craft\n"
        "4. N/A\n"
        "5. n/a.\n"
        "6.\n"
        "\n"
        "I hope this list helps."
    )
    e = extract_items(raw)
    assert [i.text for i in e.items] == [
        "Honesty, courage, and kindness",
        "Curiosity that keeps going",
        "Craft",
    ]
    assert (e.n_entries, e.n_na, e.n_empty, e.preamble) == (6, 2, 1, True)
    assert not any(i.extraction_uncertain for i in e.items)


def test_bullets_are_items_but_marked_uncertain_and_the_limit_holds():
    e = extract_items("- alpha\n* beta\n• gamma\n- delta", limit=3)
    assert [i.text for i in e.items] == ["alpha", "beta", "gamma"]
    assert [i.rank for i in e.items] == [1, 2, 3] and all(i.extraction_uncertain for i in e.items)
    # numbers out of order are kept in written order, marked uncertain
    e = extract_items("1. a\n3. b\n2. c")
    assert [i.text for i in e.items] == ["a", "b", "c"] and all(i.extraction_uncertain for i in e.items)


def test_decimals_and_prose_are_not_entries():
    e = extract_items("1. Population 3.5 million\n2. Growth of 2.1 percent")
    assert [i.text for i in e.items] == ["Population 3.5 million", "Growth of 2.1 percent"]
    assert extract_items("No list here at all.").items == ()


@pytest.mark.parametrize("indent", ["", "   ", "\t"])
def test_bullets_under_a_numbered_entry_are_part_of_it(indent):
    # the seed: one numbered entry is one item (sub-points are not items of their own)
    raw = f"1. Dosing, including:\n{indent}- how much\n{indent}* how often\n2. Side effects\n3. Interactions"
    ex = extract_items(raw)
    assert [i.text for i in ex.items] == [
        "Dosing, including: - how much * how often",
        "Side effects",
        "Interactions",
    ]
    assert not any(i.extraction_uncertain for i in ex.items) and ex.n_entries == 3


def test_a_list_of_bullets_alone_is_still_one_item_per_bullet():
    ex = extract_items("- alpha\n- beta\n  wrapped\n- gamma")
    assert [i.text for i in ex.items] == ["alpha", "beta wrapped", "gamma"]
    assert all(i.extraction_uncertain for i in ex.items)


@pytest.mark.parametrize(
    ("entry", "dropped"),
    [
        ("A person in a hurry" + "日" * 300, True),  # the base model's looped decoding
        ("A sound like " + "a" * 10, True),
        ("A sound like " + "a" * 9, False),  # one short of the bound
        ("very " * 5 + "old trees", True),
        ("very " * 4 + "old trees", False),
        ("Time, time, time, time, time!", True),  # a word repeated across punctuation
        ("1000000000 dollars", False),  # digits are not a repetition
        ("A clock ticking", False),
    ],
)
def test_degenerate_repetitions_are_counted_not_kept(entry: str, dropped: bool) -> None:
    e = extract_items(f"1. A river\n2. {entry}\n3. A candle")
    assert e.n_degenerate == int(dropped)
    assert [i.text for i in e.items] == ["A river", *([] if dropped else [entry.strip()]), "A candle"]
    assert [i.rank for i in e.items] == list(range(1, len(e.items) + 1))
