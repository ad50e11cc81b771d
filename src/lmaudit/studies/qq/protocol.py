"""What the QQ study asks: the history-conditioned forced-branch protocol (seed 000, §4, B.1-B.2).

For every item, label mapping and order, a *cell* of three prompts:

* position 1: the first question, with the framing's system prompt, any answer-format
  exemplar turns, and (once, in this first turn) the item's historical header and vignette;
* position 2 twice: the first question's turn, the first answer committed as an assistant
  message whose content is exactly the canonical label, then the second question.

A/B-labelled items show the active legend ("A = <option>") in every user turn; Yes/No items
use their canonical labels directly. Semantic coordinates: ``y`` is the item's first option.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from lmaudit.backends.base import LabelRequest, Message
from lmaudit.errors import ProtocolError
from lmaudit.studies.qq.config import FramingConfig, MappingConfig
from lmaudit.studies.qq.items import Item
from lmaudit.studies.qq.records import ORDERS, SEMANTIC, expected_label_of, request_meta


def is_yesno(item: Item) -> bool:
    return item.stratum == "S3"


def item_mappings(item: Item, mapping: MappingConfig) -> list[tuple[str, dict[str, str]]]:
    """The (mapping name, semantic -> label) assignments this item is measured under."""
    if is_yesno(item):
        yes, no = mapping.yesno_labels
        return [("yesno", {"y": yes, "n": no})]
    out = []
    for name in mapping.mappings:
        label_of = expected_label_of(name, mapping.labels, mapping.yesno_labels) if name != "yesno" else None
        if label_of is None:
            raise ProtocolError(f"mapping '{mapping.name}': unknown mapping '{name}' (expected map1 or map2)")
        out.append((name, label_of))
    if not out:
        raise ProtocolError(f"mapping '{mapping.name}': field 'mappings' is empty")
    return out


def labels_for(item: Item, mapping: MappingConfig) -> tuple[str, str]:
    return (
        (mapping.yesno_labels[0], mapping.yesno_labels[1])
        if is_yesno(item)
        else (mapping.labels[0], mapping.labels[1])
    )


def legend(options: tuple[str, str] | list[str], label_of: dict[str, str], labels: tuple[str, str]) -> str:
    """The plain-text legend, one line per label in label order (e.g. ``A = A few``)."""
    option_of_label = {label_of["y"]: options[0], label_of["n"]: options[1]}
    return "\n".join(f"{lab} = {option_of_label[lab]}" for lab in labels)


def system_prompt(item: Item, framing: FramingConfig, labels: tuple[str, str]) -> str | None:
    template = framing.system_yesno if is_yesno(item) else framing.system_ab
    if template is None:
        raise ProtocolError(
            f"framing '{framing.name}': item '{item.id}' is a Yes/No item but field 'system_yesno' is null"
        )
    if "{reference_year}" in template and item.reference_year is None:
        raise ProtocolError(
            f"framing '{framing.name}' needs a reference year but item '{item.id}' has field 'reference_year' = null"
        )
    return template.format(reference_year=item.reference_year, label_1=labels[0], label_2=labels[1])


def _turn(parts: list[str]) -> str:
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def user_turn(
    item: Item,
    question: str,
    label_of: dict[str, str],
    labels: tuple[str, str],
    *,
    first: bool,
    framing: FramingConfig,
) -> str:
    text = item.question_a if question == "A" else item.question_b
    parts: list[str] = []
    if first:
        if framing.historical_headers and item.header:
            parts.append(item.header)
        if item.vignette:
            parts.append(item.vignette)
    if not is_yesno(item):
        parts.append(legend(item.options, label_of, labels))
    parts.append(text)
    return _turn(parts)


def few_shot_turns(
    item: Item, framing: FramingConfig, label_of: dict[str, str], labels: tuple[str, str]
) -> list[Message]:
    """Answer-format exemplars of the item's kind (A/B or Yes/No), labels under the active mapping."""
    turns: list[Message] = []
    for ex in framing.few_shot:
        ex_yesno = len(ex.options) == 0
        if ex_yesno != is_yesno(item):
            continue
        if ex.answer not in (0, 1):
            raise ProtocolError(
                f"framing '{framing.name}': few_shot exemplar '{ex.question}': field 'answer' must be 0 or 1"
            )
        sem = SEMANTIC[ex.answer]
        if ex_yesno:
            content = ex.question
        else:
            if len(ex.options) != 2:
                raise ProtocolError(
                    f"framing '{framing.name}': few_shot exemplar '{ex.question}': field 'options' needs 2 entries"
                )
            content = _turn([legend(ex.options, label_of, labels), ex.question])
        turns.append({"role": "user", "content": content})
        turns.append({"role": "assistant", "content": label_of[sem]})
    return turns


@dataclass(frozen=True)
class Cell:
    item: Item
    mapping: str
    order: str
    label_of: dict[str, str]
    labels: tuple[str, str]
    requests: tuple[LabelRequest, LabelRequest, LabelRequest]  # position 1, 2|y, 2|n
    persona: str | None = None  # a mixture component's persona id (None: the plain estimand)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.item.id, self.mapping, self.order)


def build_cell(
    item: Item,
    mapping: str,
    label_of: dict[str, str],
    order: str,
    framing: FramingConfig,
    mcfg: MappingConfig,
    persona: tuple[str, str] | None = None,
) -> Cell:
    """The cell's three prompts; ``persona`` ``(id, text)`` appends its text to the system prompt."""
    if order not in ORDERS:
        raise ProtocolError(f"unknown order '{order}'")
    labels = labels_for(item, mcfg)
    first_q, second_q = (order[0], order[1])
    head: list[Message] = []
    sysp = system_prompt(item, framing, labels)
    if persona is not None:
        sysp = f"{sysp}\n\n{persona[1]}" if sysp else persona[1]
    if sysp:
        head.append({"role": "system", "content": sysp})
    head += few_shot_turns(item, framing, label_of, labels)
    u1: Message = {
        "role": "user",
        "content": user_turn(item, first_q, label_of, labels, first=True, framing=framing),
    }
    u2: Message = {
        "role": "user",
        "content": user_turn(item, second_q, label_of, labels, first=False, framing=framing),
    }

    meta = partial(request_meta, item=item.id, mapping=mapping, order=order, label_of=label_of)
    p1 = LabelRequest(
        messages=(*head, u1), labels=labels, meta=meta(position=1, question=first_q, first_answer=None)
    )
    branches = []
    for a in SEMANTIC:
        msgs = (*head, u1, {"role": "assistant", "content": label_of[a]}, u2)
        branches.append(
            LabelRequest(
                messages=msgs, labels=labels, meta=meta(position=2, question=second_q, first_answer=a)
            )
        )
    return Cell(
        item=item,
        mapping=mapping,
        order=order,
        label_of=label_of,
        labels=labels,
        requests=(p1, branches[0], branches[1]),
        persona=None if persona is None else persona[0],
    )


def build_cells(
    items: list[Item], framing: FramingConfig, mcfg: MappingConfig, persona: tuple[str, str] | None = None
) -> list[Cell]:
    cells: list[Cell] = []
    for item in items:
        for mapping, label_of in item_mappings(item, mcfg):
            for order in ORDERS:
                cells.append(build_cell(item, mapping, label_of, order, framing, mcfg, persona))
    return cells
