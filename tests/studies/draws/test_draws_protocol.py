"""Probes, requests and the normalisation rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmaudit.errors import InputError
from lmaudit.studies.draws.protocol import (
    EMPTY,
    NOMATCH,
    Probe,
    build_requests,
    load_probes,
    make_normaliser,
)

REPO = Path(__file__).resolve().parents[3]


def test_first_word_rule() -> None:
    f = make_normaliser("first_word")
    assert f("Blue.\nSomething") == "blue"
    assert f("  «Red», maybe") == "red"
    assert f("7") == "7" and f("'") == EMPTY and f("") == EMPTY and f(" \n") == EMPTY
    assert make_normaliser("first_word", case_sensitive=True)("Blue!") == "Blue"


def test_regex_rule() -> None:
    f = make_normaliser("regex", pattern=r"\b(\d+)\b")
    assert f("I pick 7 today") == "7" and f("none") == NOMATCH and f("") == EMPTY
    assert make_normaliser("regex", pattern=r"yes|no")("YES sir") == "yes"
    with pytest.raises(InputError, match="field 'pattern'"):
        make_normaliser("regex", pattern="(")
    with pytest.raises(InputError, match="field 'pattern' is required"):
        make_normaliser("regex")


def test_labels_rule_takes_the_first_whole_word_label() -> None:
    f = make_normaliser("labels", labels=["red", "blue", "dark red"])
    assert f("I'd say Blue, or red") == "blue"
    assert f("dark red for sure") == "dark red"
    assert f("redish") == NOMATCH and f("") == EMPTY
    with pytest.raises(InputError, match="field 'labels'"):
        make_normaliser("labels", labels=[])
    with pytest.raises(InputError, match="field 'kind'"):
        make_normaliser("tokens")


def test_requests_have_distinct_reproducible_seeds_and_meta() -> None:
    probes = [Probe("a", "Name a color."), Probe("b", "Pick a number.", system="Be brief.")]
    conds = [
        {"name": "plain", "system": None, "temperature": None},
        {"name": "hot", "system": "One word.", "temperature": 1.2},
    ]
    ex = [{"prompt": "Name a fruit.", "answer": "Apple"}]
    kw = {"replicates": 2, "n": 5, "temperature": 0.7, "top_p": 1.0, "max_tokens": 1, "seed": 3}
    reqs = build_requests(probes, conds, ex, **kw)
    again = build_requests(probes, conds, ex, **kw)
    assert len(reqs) == 8 and [r.seed for r in reqs] == [r.seed for r in again]
    assert len({r.seed for r in reqs}) == 8
    first = reqs[0]
    assert first.meta == {"study": "draws", "probe": "a", "condition": "plain", "replicate": 0}
    assert [m["role"] for m in first.messages] == ["user", "assistant", "user"]
    hot_b = next(r for r in reqs if r.meta["probe"] == "b" and r.meta["condition"] == "hot")
    assert hot_b.messages[0] == {"role": "system", "content": "One word."} and hot_b.temperature == 1.2
    plain_b = next(r for r in reqs if r.meta["probe"] == "b" and r.meta["condition"] == "plain")
    assert plain_b.messages[0]["content"] == "Be brief." and plain_b.temperature == 0.7


def test_demo_probes_load_and_bad_probe_files_are_named(tmp_path: Path) -> None:
    probes = load_probes(REPO / "data/draws/probes.jsonl")
    assert len(probes) >= 5 and len({p.id for p in probes}) == len(probes)
    assert [p.id for p in load_probes(REPO / "data/draws/probes.jsonl", ["color"])] == ["color"]
    with pytest.raises(InputError, match="probe_ids"):
        load_probes(REPO / "data/draws/probes.jsonl", ["nope"])
    with pytest.raises(InputError, match=r"\['colour'\] \(did you mean 'color'\?\)"):
        load_probes(REPO / "data/draws/probes.jsonl", ["colour"])
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n')
    with pytest.raises(InputError, match=r"line 2: field 'id' = 'a' is used twice"):
        load_probes(bad)
    bad.write_text('{"id": "a"}\n')
    with pytest.raises(InputError, match=r"line 1: field 'prompt'"):
        load_probes(bad)
