"""Plain-text helpers shared by the studies, the interop readers and the ``sim`` backend.

:func:`question_words` reads the content words of a question: the choir study's echo check and
its sim free-list generators both use it, so a generator's planted echo and the study's
detection of echo read the same words. :func:`metric_safe` writes a name as MLflow metric and
tag keys take it; :func:`metrics_under` names a record's known values under one prefix.
"""

from __future__ import annotations

import re

__all__ = ["metric_safe", "metrics_under", "question_words"]

_NOT_IN_METRIC_KEYS = re.compile(r"[^A-Za-z0-9_.\-/ ]")

_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "for",
        "from",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "what",
        "when",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "please",
        "list",
        "most",
        "write",
        "give",
        "name",
        "make",
        "one",
        "25",
        "up",
    ]
)


def question_words(text: str) -> list[str]:
    """The content words of a question (lower case, stop words and numbers left out)."""
    words = re.findall(r"[a-z][a-z'\-]+", text.lower())
    return list(dict.fromkeys(w for w in words if w not in _STOP and len(w) > 2))


def metric_safe(name: str) -> str:
    """``name`` with every character MLflow refuses in a metric or tag key replaced by ``_``."""
    return _NOT_IN_METRIC_KEYS.sub("_", name)


def metrics_under(prefix: str, /, **values: float | None) -> dict[str, float]:
    """``{prefix}.{name}: value`` for every value that is known, in the order given; a value
    that is None (a rate of no cases) is left out, since MLflow logs numbers only."""
    return {f"{prefix}.{name}": value for name, value in values.items() if value is not None}
