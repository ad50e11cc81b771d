"""The QQ measurement record: one line of ``measurements.jsonl`` per measured position.

This schema is the interface between ``measure`` and ``analyze``; measurements made
elsewhere can be converted to it and re-scored (see ``docs/measurement_schema.md``).

Semantic coordinates: for every item, ``y`` is the item's first semantic option and ``n``
its second (for Yes/No items ``y`` = Yes). Question ``A`` is the item's first question.
A *cell* is (item, mapping, order); it has three positions: position 1 (the first question,
no history) and position 2 twice, once with each first answer committed to the history.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

ORDERS = ("AB", "BA")
SEMANTIC = ("y", "n")
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Measurement:
    item: str  # item id, e.g. "s1-01"
    stratum: str  # "S1" | "S2" | "S3"
    mapping: str  # "map1" | "map2" | "yesno"
    order: str  # "AB" | "BA": which question is asked first
    position: int  # 1 | 2
    question: str  # "A" | "B": the question asked at this position
    first_answer: str | None  # None at position 1; "y" | "n" (semantic) committed at position 2
    label_of: dict[str, str]  # semantic -> label under this mapping, e.g. {"y": "A", "n": "B"}
    probs: dict[str, float]  # raw next-token probability of each canonical label
    other: float  # 1 - sum(probs): mass on every other token
    top_k: list[list[Any]] = field(default_factory=list)  # [[token_text, prob], ...]
    estimand: str = "logprob"  # "logprob" | "sampled"
    n_draws: int | None = None  # sampled: number of draws made at this position
    counts: dict[str, int] | None = None  # sampled: label -> count, plus "other"
    label_token_ids: dict[str, int] = field(default_factory=dict)  # token id each label scored
    schema: int = SCHEMA_VERSION

    @property
    def p_y(self) -> float:
        return self.probs[self.label_of["y"]]

    @property
    def p_n(self) -> float:
        return self.probs[self.label_of["n"]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Measurement:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


def cell_key(m: Measurement) -> tuple[str, str, str]:
    return (m.item, m.mapping, m.order)


def position_key(m: Measurement) -> tuple[str, str, str, int, str | None]:
    return (m.item, m.mapping, m.order, m.position, m.first_answer)


def request_meta(
    *,
    item: str,
    mapping: str,
    order: str,
    position: int,
    question: str,
    first_answer: str | None,
    label_of: dict[str, str],
) -> dict[str, Any]:
    """The ``meta`` attached to every QQ backend request (read only by ``sim`` agents)."""
    return {
        "study": "qq",
        "item": item,
        "mapping": mapping,
        "order": order,
        "position": position,
        "question": question,
        "first_answer": first_answer,
        "label_of": dict(label_of),
    }
