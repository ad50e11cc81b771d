"""What analysing QQ measurements needs of an item bank: each item's id, stratum, options and
(S2) the S1 item it is matched to. Question texts, reference years, headers and the presence of
every matched S1 item belong to measuring; re-analysing measurements made elsewhere needs only a
minimal bank (docs/item_bank.md, "Minimal banks for analysis"). A full bank is a minimal bank.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmaudit.errors import InputError, ItemBankError
from lmaudit.provenance.digest import file_sha256
from lmaudit.provenance.io import read_json
from lmaudit.studies.qq.items import STRATA, YES_NO
from lmaudit.studies.qq.records import Measurement


@dataclass(frozen=True)
class BankEntry:
    id: str
    stratum: str
    options: tuple[str, str]
    matched_to: str | None = None


def _entry(where: str, i: int, obj: Any, problems: list[str]) -> BankEntry | None:
    label = f"{where}: item {obj.get('id')!r} (index {i})" if isinstance(obj, dict) else f"{where}: item {i}"
    if not isinstance(obj, dict):
        problems.append(f"{label}: must be a JSON object")
        return None
    n = len(problems)
    for key in ("id", "stratum", "options"):
        if key not in obj:
            problems.append(f"{label}: field '{key}': missing (required)")
    if len(problems) > n:
        return None
    opts, matched = obj["options"], obj.get("matched_to")
    if not isinstance(obj["id"], str) or not obj["id"]:
        problems.append(f"{label}: field 'id': must be a non-empty string")
    if obj["stratum"] not in STRATA:
        problems.append(
            f"{label}: field 'stratum': must be one of {', '.join(STRATA)}, got {obj['stratum']!r}"
        )
    if not (
        isinstance(opts, list) and len(opts) == 2 and all(isinstance(o, str) and o.strip() for o in opts)
    ):
        problems.append(f"{label}: field 'options': must be a list of exactly two option strings")
    elif obj["stratum"] == "S3" and tuple(opts) != YES_NO:
        problems.append(f"{label}: field 'options': S3 items are answered Yes/No, got {opts!r}")
    if matched is not None and not isinstance(matched, str):
        problems.append(f"{label}: field 'matched_to': must be an item id or null")
    if len(problems) > n:
        return None
    return BankEntry(str(obj["id"]), str(obj["stratum"]), (opts[0], opts[1]), matched)


def load_analysis_bank(path: str | Path) -> dict[str, BankEntry]:
    """The bank's entries by id; every problem reported at once (``ItemBankError``)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: item bank not found (study.items.path)")
    doc = read_json(p)
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ItemBankError(p, [f"{p}: field 'items': must be a list of items"])
    problems: list[str] = []
    entries = [_entry(str(p), i, obj, problems) for i, obj in enumerate(items)]
    seen: set[str] = set()
    for e in entries:
        if e is not None and e.id in seen:
            problems.append(f"{p}: item {e.id!r}: field 'id': duplicate id")
        if e is not None:
            seen.add(e.id)
    if problems:
        raise ItemBankError(p, problems)
    return {e.id: e for e in entries if e is not None}


def check_against_bank(
    positions: Iterable[Measurement], bank: dict[str, BankEntry], source: str, bank_path: str
) -> None:
    """Each record's item must be in the bank, with the bank's stratum (its mapping is then
    checked against the stratum by ``check_label_assignment``)."""
    unknown: set[str] = set()
    for m in positions:
        entry = bank.get(m.item)
        if entry is None:
            unknown.add(m.item)
        elif m.stratum != entry.stratum:
            raise InputError(
                f"{source}: item {m.item!r}, mapping {m.mapping!r}, order {m.order!r}, position {m.position}: "
                f"field 'stratum' = {m.stratum!r}, but the item bank {bank_path} says {entry.stratum!r}"
            )
    if unknown:
        raise InputError(f"{source}: items {sorted(unknown)} are not in the item bank {bank_path}")


def memorization_pairs(bank: dict[str, BankEntry], measured: set[str]) -> dict[str, str]:
    """S2 item -> its S1 item, for pairs whose S2 item was measured (a missing S1 is reported
    by the memorization alert as missing)."""
    return {e.id: e.matched_to for e in bank.values() if e.matched_to and e.id in measured}


def bank_digest(path: str | Path) -> dict[str, str]:
    return {"path": str(path), "sha256": file_sha256(path)}
