"""What a choir run analysed (members, questions, conditions, lists, how items were extracted);
the audit of imported logs is the shared :class:`lmaudit.interop.sections.LogAudit`."""

from __future__ import annotations

from typing import Any

from lmaudit.results import JsonRecord


class RefusedLists(JsonRecord):
    n: int
    reasons: dict[str, int]


class RuleExtraction(JsonRecord):
    """Items extracted from the lists by rule."""

    method: str  # rule


class LlmExtraction(JsonRecord):
    """Items extracted by a model: the lists and distinct answers it read, its invalid replies
    and what was done with them (as the measurement's extractor record gave them)."""

    method: str  # llm
    lists: int | None
    distinct_answers: int | None
    invalid: int | None
    on_invalid: str | None
    # the extracting model's backend identity, copied as the backend gave it (free-form)
    identity: dict[str, Any] | None


class Design(JsonRecord):
    """What was analysed: members, questions, conditions and lists."""

    models: tuple[str, ...]
    questions: int
    conditions: tuple[str, ...]
    lists: int
    empty_lists: int
    degenerate_items: int
    refused_lists: RefusedLists
    extraction: LlmExtraction | RuleExtraction
