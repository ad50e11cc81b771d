"""Two runs' designs side by side: the keys of their plans that differ, then those that agree.

A run's design is what its ``plan.json`` fixes before any model call: the resolved ``config``
(the DVC params of the analyze stage) and the ``inputs`` it read (paths and SHA-256 digests),
flattened to dotted keys (``framing.track``, ``inputs.items.sha256``). ``lmaudit compare RUN_A
RUN_B`` prints this table above the paired comparison; ``--design`` prints it alone, for any
two run folders (their designs may differ in anything, their studies too).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lmaudit.terminal import printable
from lmaudit.tracking.mlflow_log import flatten

__all__ = ["DesignTable", "design_keys", "design_table"]

#: widest value cell printed (the JSON holds every value whole)
CELL_WIDTH = 48
#: width the folded list of agreeing keys wraps at
LINE_WIDTH = 100


def design_keys(plan: Mapping[str, Any]) -> dict[str, Any]:
    """A plan's design as dotted keys: its ``config`` as is, its ``inputs`` under ``inputs.``, and
    its ``mode`` when it has one (``import`` for an imported run)."""
    keys = flatten(plan.get("config") or {})
    keys.update(flatten({"inputs": plan.get("inputs") or {}}))
    if plan.get("mode") is not None:
        keys["mode"] = plan["mode"]
    return keys


@dataclass(frozen=True)
class DesignTable:
    """``differ``: (key, A's value, B's value, set in A, set in B) for each key whose values
    differ or that one run alone sets; ``same``: every key both set alike, with its value."""

    differ: list[tuple[str, Any, Any, bool, bool]]
    same: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """``differ`` rows hold ``a`` / ``b`` only for the runs that set the key."""
        rows = []
        for key, a, b, in_a, in_b in self.differ:
            row: dict[str, Any] = {"key": key}
            if in_a:
                row["a"] = a
            if in_b:
                row["b"] = b
            rows.append(row)
        return {"differ": rows, "same": self.same}

    def to_text(self) -> list[str]:
        """The differing keys as a table (long values cut), then the agreeing keys folded by
        their first part (``study (18 keys)``)."""
        from lmaudit.tracking.compare import aligned

        out = [f"design: {len(self.differ)} keys differ, {len(self.same)} agree (plan.json: config, inputs)"]
        if self.differ:
            rows = [
                [printable(key), _cell(a) if in_a else "(not set)", _cell(b) if in_b else "(not set)"]
                for key, a, b, in_a, in_b in self.differ
            ]
            out += ["  " + line for line in aligned(["key", "A", "B"], rows)]
        else:
            out.append("  the two designs are the same")
        if self.same:
            groups = Counter(key.split(".", 1)[0] for key in self.same)
            parts = [f"{printable(g)} ({n} key{'s' if n > 1 else ''})" for g, n in sorted(groups.items())]
            out += _wrapped("  agree: ", parts)
        return out


def design_table(plan_a: Mapping[str, Any], plan_b: Mapping[str, Any]) -> DesignTable:
    """The keys of two plans' designs (:func:`design_keys`) that differ, in key order, and those
    that agree."""
    a, b = design_keys(plan_a), design_keys(plan_b)
    differ = []
    same = {}
    for key in sorted(set(a) | set(b)):
        if key in a and key in b and _canonical(a[key]) == _canonical(b[key]):
            same[key] = a[key]
        else:
            differ.append((key, a.get(key), b.get(key), key in a, key in b))
    return DesignTable(differ, same)


def _canonical(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _cell(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    text = printable(text)
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 3] + "..."


def _wrapped(lead: str, parts: list[str]) -> list[str]:
    lines, line = [], lead
    for i, part in enumerate(parts):
        piece = part + ("," if i < len(parts) - 1 else "")
        if line.strip() and len(line) + len(piece) + 1 > LINE_WIDTH and line != lead:
            lines.append(line.rstrip())
            line = " " * len(lead)
        line += piece + " "
    lines.append(line.rstrip())
    return lines
