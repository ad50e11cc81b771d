"""The QQ measurement record: one line of ``measurements.jsonl`` per measured position.

This schema is the interface between ``measure`` and ``analyze``; measurements made
elsewhere can be converted to it and re-scored (see ``docs/measurement_schema.md``).

Semantic coordinates: for every item, ``y`` is the item's first semantic option and ``n``
its second (for Yes/No items ``y`` = Yes). Question ``A`` is the item's first question.
A *cell* is (item, mapping, order); it has three positions: position 1 (the first question,
no history) and position 2 twice, once with each first answer committed to the history.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lmaudit.errors import InputError

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
        """A record from its JSON form; ValueError naming the field for a probability that is
        not a JSON number (strings and booleans are never coerced), not finite or outside
        [0, 1], an ``other`` that is not a finite number, or a ``label_of`` that is not a
        distinct ``y``/``n`` assignment of labels present in ``probs``."""
        check_fields(d)
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


def _is_number(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, int | float) and math.isfinite(x)


def check_fields(d: dict[str, Any]) -> None:
    """The value checks of :meth:`Measurement.from_json` (see there)."""
    probs = d.get("probs")
    if not isinstance(probs, dict) or not probs:
        raise ValueError(f"field 'probs' must be an object of label probabilities, got {probs!r}")
    for label, p in probs.items():
        if not _is_number(p):
            raise ValueError(f"field 'probs.{label}' = {p!r} is not a finite JSON number")
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"field 'probs.{label}' = {p!r} is not a probability in [0, 1]")
    if "other" in d and not _is_number(d["other"]):
        raise ValueError(f"field 'other' = {d['other']!r} is not a finite JSON number")
    label_of = d.get("label_of")
    if (
        not isinstance(label_of, dict)
        or sorted(label_of) != sorted(SEMANTIC)
        or not all(isinstance(v, str) for v in label_of.values())
    ):
        raise ValueError(f"field 'label_of' = {label_of!r} must map 'y' and 'n' to labels")
    if label_of["y"] == label_of["n"]:
        raise ValueError(f"field 'label_of' = {label_of!r}: y and n share one label")
    if d.get("estimand", "logprob") == "logprob":
        missing = [v for v in label_of.values() if v not in probs]
        if missing:
            raise ValueError(f"field 'probs' has no probability for label(s) {missing} of 'label_of'")


def expected_label_of(
    mapping: str, labels: Sequence[str], yesno_labels: Sequence[str]
) -> dict[str, str] | None:
    """The label assignment a mapping makes (the protocol's, :func:`protocol.item_mappings`):
    ``map1`` gives option 1 (``y``) the first label, ``map2`` the second, ``yesno`` the
    Yes/No labels; None for a mapping name the protocol does not know."""
    if mapping == "map1":
        return {"y": labels[0], "n": labels[1]}
    if mapping == "map2":
        return {"y": labels[1], "n": labels[0]}
    if mapping == "yesno":
        return {"y": yesno_labels[0], "n": yesno_labels[1]}
    return None


def check_label_assignment(
    ms: Iterable[Measurement], labels: Sequence[str], yesno_labels: Sequence[str], source: str
) -> None:
    """InputError for a record whose ``label_of`` is not its mapping's assignment under the
    configured labels (or whose mapping does not fit its stratum: Yes/No items are S3)."""
    for m in ms:
        where = (
            f"{source}: item {m.item!r}, mapping {m.mapping!r}, order {m.order!r}, "
            f"position {m.position} (first answer {m.first_answer!r})"
        )
        if (m.mapping == "yesno") != (m.stratum == "S3"):
            raise InputError(f"{where}: field 'mapping' = {m.mapping!r} does not fit stratum {m.stratum!r}")
        want = expected_label_of(m.mapping, labels, yesno_labels)
        if want is None:
            raise InputError(f"{where}: field 'mapping' = {m.mapping!r} is not map1, map2 or yesno")
        if dict(m.label_of) != want:
            raise InputError(
                f"{where}: field 'label_of' = {dict(m.label_of)} disagrees with mapping {m.mapping!r}, "
                f"which assigns {want} (labels {list(labels)}, Yes/No labels {list(yesno_labels)})"
            )


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
