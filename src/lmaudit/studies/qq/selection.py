"""The items a QQ run measures, from a loaded bank (:mod:`lmaudit.studies.qq.items`).

``select_items`` turns the configured item ids into items, rejecting unknown ids (with a
close-match suggestion), repeated ids and, under Track P, items not marked ``track_p``,
before any model call.
"""

from __future__ import annotations

from collections.abc import Sequence

from lmaudit.errors import ItemSelectionError
from lmaudit.provenance.jsoncheck import suggest
from lmaudit.studies.qq.items import Item, ItemBank

__all__ = ["select_items"]


def select_items(bank: ItemBank, ids: Sequence[str] | None = None, track_p_only: bool = False) -> list[Item]:
    """The items to measure, in bank order.

    ``ids=None`` selects every item (only the ``track_p`` ones when ``track_p_only``). Unknown,
    repeated or (under ``track_p_only``) non-Track-P ids raise ``ItemSelectionError``.
    """
    where = f"bank {bank.name!r} ({bank.path})"
    if ids is None:
        chosen = [it for it in bank.items if it.track_p or not track_p_only]
        if not chosen:
            raise ItemSelectionError(f"{where} has no items with track_p=true, but track_p_only is set")
        return chosen
    if isinstance(ids, str):
        raise TypeError(f"ids must be a list of item ids, not the string {ids!r}")
    wanted = [str(i) for i in ids]
    if not wanted:
        raise ItemSelectionError(f"empty item selection for {where}: give at least one id, or null for all")
    problems: list[str] = []
    unknown = [i for i in wanted if i not in bank]
    for i in unknown:
        problems.append(f"unknown item {i!r}{suggest(i, bank.ids, n=3)}")
    repeated = sorted({i for i in wanted if wanted.count(i) > 1})
    if repeated:
        problems.append(f"item(s) listed more than once: {', '.join(repeated)}")
    if track_p_only:
        excluded = [i for i in dict.fromkeys(wanted) if i in bank and not bank[i].track_p]
        if excluded:
            problems.append(
                f"not Track P items (track_p is false) but track_p_only is set: {', '.join(excluded)}"
            )
    if problems:
        known = f"known ids: {', '.join(bank.ids)}" if unknown else ""
        raise ItemSelectionError(
            f"invalid item selection for {where}: " + "; ".join(problems) + (f"; {known}" if known else "")
        )
    keep = set(wanted)
    return [it for it in bank.items if it.id in keep]
