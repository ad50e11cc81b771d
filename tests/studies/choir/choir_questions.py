"""A question's typed results with only the fields a test sets (the rest empty), for tests of
the builders that read questions' results across the bank."""

from __future__ import annotations

from typing import Any

from lmaudit.studies.choir.results import QuestionResult, SalienceTable
from lmaudit.studies.choir.results.question import ConditionBlock, SalienceTies


def question(**fields: Any) -> QuestionResult:
    """A :class:`QuestionResult` of no lists, with ``fields`` set."""
    empty: dict[str, Any] = {
        "n_models": 0,
        "n_models_unconditioned": 0,
        "n_models_per_persona": {},
        "n_lists": 0,
        "n_items": 0,
        "n_concepts": 0,
        "n_clusters": 0,
        "n_noise_items": 0,
        "C_q": 0,
        "R_q": None,
        "width": None,
        "same_persona_rbo": {},
        "same_persona_rbo_mean": None,
        "lift": None,
        "stc": None,
        "stc_ranking_shuffle": None,
        "template_novelty": None,
        "echo": None,
        "echo_rate": None,
        "codebook_test": None,
        "top_concepts": {},
        "salience": SalienceTable(groups=(), columns=(), rows=(), codebook=()),
        "conditions": ConditionBlock(
            cells=(), columns=(), salience=(), R_q={}, template=None, temperature=None
        ),
        "salience_ties": SalienceTies(tied_share=None, R_q_tie_rule=None),
    }
    return QuestionResult(**(empty | fields))
