"""The pure analysis builds the typed sections of ``results.json`` itself: on a small fixed
design with every optional section present (two templates, personas with profile words, a
cue-stripped prompt), :func:`analyze_lists` returns records, and each record writes the JSON it
reads back (an interval built from ints would write ``[0, 1]`` where the file holds
``[0.0, 1.0]``)."""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np

from lmaudit.results import JsonRecord
from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.lists import analyze_lists
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord
from lmaudit.studies.choir.results import (
    AcrossQuestions,
    CodebookMetricSensitivity,
    ConditionSummary,
    CueStripping,
    Leakage,
    ListsSections,
    NoveltyByWidth,
    QuestionResult,
    Recovery,
    WidthBin,
)

WORDS = [f"w{i}" for i in range(24)]
PROFILE = {"p1": ["sea", "ship"], "p2": ["farm", "field"]}
QUESTION_TERMS = {"Q1": ["clock", "time"], "Q2": ["rain"]}


def _design() -> tuple[list[ListRecord], dict[str, np.ndarray]]:
    rng = np.random.default_rng(20260705)
    texts = [*WORDS, *(w for ws in PROFILE.values() for w in ws), "clock", "time", "rain"]
    raw = rng.normal(size=(len(texts), 8))
    vec = {t: (v / np.linalg.norm(v)).astype(np.float32) for t, v in zip(texts, raw, strict=True)}
    recs = []
    for q in ("Q1", "Q2", "Q1-S"):
        for m in ("m1", "m2", "m3"):
            for g in range(2):
                for cond, persona in (
                    ("A", UNCONDITIONED),
                    ("B", UNCONDITIONED),
                    ("A|p1", "p1"),
                    ("A|p2", "p2"),
                ):
                    items = tuple(str(w) for w in rng.choice(WORDS, 5, replace=False))
                    if q == "Q1" and g == 0:
                        items = ("clock", *items[1:])  # the anchor echoes in the original only
                    recs.append(ListRecord(m, q, cond, persona, 0.7, g, items))
    return recs, vec


def _settings() -> ChoirStudyConfig:
    s = ChoirStudyConfig()
    s.shuffles, s.permutations, s.n_boot, s.n_null = 20, 20, 20, 10
    return s


def _writes_what_it_reads(rec: JsonRecord) -> bool:
    body = json.dumps(rec.to_json(), sort_keys=True)
    return body == json.dumps(type(rec).from_json(rec.to_json()).to_json(), sort_keys=True)


def test_analyze_lists_returns_records_that_read_back_as_written() -> None:
    recs, vec = _design()
    pairs = [{"original": "Q1", "stripped": "Q1-S", "anchors": ["clock"]}]
    out = analyze_lists(recs, vec, QUESTION_TERMS, _settings(), PROFILE, pairs, degenerate_items=3)
    assert isinstance(out, ListsSections)
    assert isinstance(out.across_questions, AcrossQuestions) and out.across_questions.n_degenerate_items == 3
    assert out.across_questions.n_questions == 2  # the stripped prompt is not a bank prompt
    assert set(out.questions) == {"Q1", "Q2", "Q1-S"}
    assert all(isinstance(v, QuestionResult) for v in out.questions.values())
    assert out.questions["Q1-S"].stripped_of == "Q1" and out.questions["Q1"].stripped_of is None
    assert out.width_bins and all(isinstance(b, WidthBin) for b in out.width_bins)
    assert {"model", "persona"} <= set(out.recoverability)
    assert all(isinstance(r, Recovery) for r in out.recoverability.values())
    assert isinstance(out.leakage, Leakage) and isinstance(out.cue_stripping, CueStripping)
    assert isinstance(out.conditions, ConditionSummary) and isinstance(out.novelty_by_width, NoveltyByWidth)
    assert isinstance(out.codebook_metric_sensitivity, CodebookMetricSensitivity)
    assert out.codebook_source == "clustered"
    sections = [out.across_questions, *out.questions.values(), *out.width_bins, *out.recoverability.values()]
    sections += [out.leakage, out.cue_stripping, out.conditions, out.novelty_by_width]
    sections += [out.codebook_metric_sensitivity]
    for rec in sections:
        assert _writes_what_it_reads(rec), type(rec).__name__
    # every optional part of a question is exercised
    q = out.questions["Q1"]
    present = {f.name for f in fields(q) if getattr(q, f.name) is not None}
    assert {"lift", "metric_sensitivity", "stc", "template_novelty", "echo", "anchor_echo"} <= present


def test_without_bootstrap_recoverability_has_no_interval_and_reads_back() -> None:
    """``n_boot = 0`` draws no bootstrap: each classifier's ``ci`` is ``[null, null]`` (as
    ``null_band`` is without a null), written and read back, never a NaN interval."""
    recs, vec = _design()
    s = _settings()
    s.n_boot = 0
    out = analyze_lists(recs, vec, QUESTION_TERMS, s, PROFILE)
    assert out.recoverability and all(r.interval is None for r in out.recoverability.values())
    for rec in out.recoverability.values():
        assert rec.to_json()["ci"] == [None, None] and _writes_what_it_reads(rec)
    assert out.leakage is not None and all(run.model_ci is None for run in out.leakage.stripping)
    assert _writes_what_it_reads(out.leakage)
