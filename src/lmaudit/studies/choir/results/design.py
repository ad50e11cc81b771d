"""What a choir run analysed (members, questions, conditions, lists, how items were extracted)
and the audit of imported logs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lmaudit.results import JsonRecord


@dataclass(frozen=True)
class RefusedLists(JsonRecord):
    n: int
    reasons: dict[str, int]


@dataclass(frozen=True)
class RuleExtraction(JsonRecord):
    """Items extracted from the lists by rule."""

    method: str  # rule


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class LogFile(JsonRecord):
    """An imported log file (or group of files) and what its reader found."""

    files: tuple[str, ...]
    family: str
    source: str
    facts: dict[str, Any]  # the log's settings as its reader reports them (free-form)
    counts: dict[str, int]
    issues: tuple[str, ...]


@dataclass(frozen=True)
class LogFamily(JsonRecord):
    sources: tuple[str, ...]
    temperature: tuple[float | str, ...]
    greedy: bool
    issues: dict[str, int]


@dataclass(frozen=True)
class LogAudit(JsonRecord):
    """The settings and issues of imported logs (docs/interop.md)."""

    format: str
    normalise: Any  # the reader's normalisation setting, copied (free-form)
    files: tuple[LogFile, ...]
    families: dict[str, LogFamily]
    issues: tuple[dict[str, Any], ...]  # one per issue and file, with the reader's own fields (free-form)
    totals: dict[str, int]
    n_excluded: int
    greedy_families: tuple[str, ...]
    unidentified_families: tuple[str, ...]
