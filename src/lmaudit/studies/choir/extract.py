"""Concept extraction by rule: one numbered entry of a free list is one concept item.

- An entry starts at a line ``1.``, ``1)``, ``(1)``, ``#1``, ``1 -`` or a bullet (``-``, ``*``,
  ``•``); lines that follow it (wrapped text) belong to it until the next entry starts. Once a
  numbered entry has started, a bullet line is part of it (sub-points of one numbered entry
  are one item, as the seed's rule has it), not an entry of its own.
- ``[Justification: ...]`` (possibly over several lines) is split off the entry's text and kept
  apart; comma-separated subphrases inside one entry are not split.
- Text before the first entry (a preamble) and after a blank line that ends the list (a
  closing remark) is not an item. An entry whose text is ``N/A`` (any case, optional
  punctuation) is counted, not kept; so is an empty one.
- Markdown emphasis (``**``, ``__``) and a trailing colon-only heading mark are removed.
- An entry that runs into a degenerate repetition (decoding that looped: one character other
  than a digit or white space repeated :data:`CHAR_RUN` times or more in a row, or one word
  :data:`WORD_RUN` times or more in a row) is not a concept: it is counted, not kept.
- At most ``limit`` items are kept (the templates ask for 25); ranks are the kept order.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

__all__ = ["Extraction", "Item", "extract_items"]

_ENTRY = re.compile(r"^\s*(?:\(?(\d{1,3})[.)]|#(\d{1,3})[.):]?|(\d{1,3})\s+[-–]|[-*•])(?:\s+(.*))?$")
_JUST = re.compile(r"\[\s*justification\s*:\s*(.*?)\]", re.IGNORECASE | re.DOTALL)
_NA = re.compile(r"^\W*n\s*/?\s*a\W*$", re.IGNORECASE)
#: a degenerate repetition: one character (not a digit or space) this many times in a row ...
CHAR_RUN = 10
#: ... or one word this many times in a row, separated by anything but a word character
WORD_RUN = 5
_CHAR_REPEAT = re.compile(rf"([^\s\d])\1{{{CHAR_RUN - 1},}}")
_WORD_REPEAT = re.compile(rf"\b(\w+)\b(?:\W+\1\b){{{WORD_RUN - 1},}}", re.IGNORECASE)


def degenerate(text: str) -> bool:
    """Whether ``text`` holds a degenerate repetition (see the module notes)."""
    return bool(_CHAR_REPEAT.search(text) or _WORD_REPEAT.search(text))


@dataclass(frozen=True)
class Item:
    rank: int
    text: str
    justification: str | None
    extraction_uncertain: bool  # e.g. a bullet list (no numbers), or numbers out of order

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Extraction:
    items: tuple[Item, ...]
    n_entries: int  # entries found (before N/A and the limit)
    n_na: int
    n_empty: int
    preamble: bool  # text before the first entry
    n_degenerate: int = 0  # entries dropped as degenerate repetitions


def _clean(text: str) -> str:
    text = re.sub(r"(\*\*|__)", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text.rstrip(":").strip() if text.endswith(":") and len(text) > 1 else text


def extract_items(raw: str, limit: int = 25) -> Extraction:
    """The concept items of one free-list answer (see the module notes)."""
    entries: list[tuple[int | None, list[str]]] = []
    preamble = False
    ended = False
    blank = False
    for line in raw.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        m = _ENTRY.match(line)
        bullet = m is not None and not any(m.groups()[:3])
        if m and bullet and entries and entries[-1][0] is not None and not ended:
            entries[-1][1].append(line.strip())  # a sub-point of the numbered entry
            blank = False
        elif m:
            num = next((int(g) for g in m.groups()[:3] if g), None)
            entries.append((num, [m.group(4) or ""]))
            ended, blank = False, False
        elif not line.strip():
            blank = True
        elif entries and not ended:
            if blank and not line.startswith((" ", "\t", "[")):
                ended = True  # a closing remark after the list
            else:
                entries[-1][1].append(line.strip())
            blank = False
        elif not entries:
            preamble = True
    items: list[Item] = []
    n_na = n_empty = n_degenerate = 0
    numbers = [n for n, _ in entries if n is not None]
    numbered = len(numbers) == len(entries)
    in_order = not numbers or numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    for _, parts in entries:
        body = "\n".join(parts)
        just = [_clean(j) for j in _JUST.findall(body)]
        text = _clean(_JUST.sub(" ", body))
        if not text:
            n_empty += 1
            continue
        if _NA.match(text):
            n_na += 1
            continue
        if degenerate(text):
            n_degenerate += 1
            continue
        if len(items) < limit:
            items.append(
                Item(
                    rank=len(items) + 1,
                    text=text,
                    justification=" ".join(j for j in just if j) or None,
                    extraction_uncertain=not (numbered and in_order),
                )
            )
    return Extraction(tuple(items), len(entries), n_na, n_empty, preamble, n_degenerate)
