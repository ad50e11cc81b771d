"""The seed's template comparison (section 4.3): the share of the depth-pressure template B's
distinct concepts that no baseline-template A list of the prompt names, and the count of
prompts above one half (the seed: 65/100). Concepts here are distinct texts on orthogonal
vectors, so each is its own codebook concept and the shares are exact fractions."""

from __future__ import annotations

import numpy as np
import pytest

from lmaudit.studies.choir.config import ChoirStudyConfig
from lmaudit.studies.choir.lists import analyze_lists
from lmaudit.studies.choir.records import UNCONDITIONED, ListRecord
from lmaudit.studies.choir.results import ListsSections
from lmaudit.studies.choir.results.question import TemplateNovelty

WORDS = [f"w{i}" for i in range(20)]


def _rec(model: str, question: str, template: str, items: list[str]) -> ListRecord:
    return ListRecord(model, question, template, UNCONDITIONED, 0.7, 0, tuple(items))


def _analyse(recs: list[ListRecord]) -> ListsSections:
    eye = np.eye(len(WORDS), dtype=np.float32)
    s = ChoirStudyConfig()
    s.shuffles = 0
    s.permutations = 0
    return analyze_lists(recs, {w: eye[i] for i, w in enumerate(WORDS)}, {}, s)


def test_novelty_share_and_the_count_above_one_half() -> None:
    recs = [
        # Q1: A names w0-w4 (over two members), B names w3-w7: 3 of its 5 concepts are new
        _rec("m1", "Q1", "A", WORDS[0:3]),
        _rec("m2", "Q1", "A", WORDS[2:5]),
        _rec("m1", "Q1", "B", WORDS[3:6]),
        _rec("m2", "Q1", "B", WORDS[5:8]),
        # Q2: B repeats A but for one of its 4 concepts
        _rec("m1", "Q2", "A", WORDS[10:14]),
        _rec("m2", "Q2", "B", [*WORDS[10:13], WORDS[15]]),
        # Q3: no template B
        _rec("m1", "Q3", "A", WORDS[0:4]),
        _rec("m2", "Q3", "A", WORDS[1:5]),
    ]
    body = _analyse(recs)
    q = body.questions
    assert q["Q1"].template_novelty == TemplateNovelty(
        baseline="A", template="B", n_concepts=5, n_novel=3, share=pytest.approx(3 / 5)
    )
    nov = q["Q2"].template_novelty
    assert nov is not None and nov.share == pytest.approx(1 / 4)
    assert q["Q3"].template_novelty is None
    assert (body.across_questions.novelty_over_half, body.across_questions.n_template_novelty) == (1, 2)


def test_persona_lists_are_not_the_baseline() -> None:
    # a concept only a persona-conditioned A list names is still novel for B
    recs = [
        _rec("m1", "Q", "A", WORDS[0:2]),
        ListRecord("m1", "Q", "A|p1", "p1", 0.7, 0, (WORDS[2],)),
        _rec("m2", "Q", "B", WORDS[1:3]),
    ]
    nov = _analyse(recs).questions["Q"].template_novelty
    assert nov is not None and (nov.n_novel, nov.n_concepts) == (1, 2)
