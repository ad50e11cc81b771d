"""What a registration file may set, checked before Hydra reads it (:func:`check_registrations`).

A registration (``conf/prereg/<name>.yaml``, ``# @package _global_``) fixes a study's design
and its predictions: the ``study`` and ``model`` it runs (its defaults list may override only
``/study...`` and ``/model`` groups), the ``study`` and ``model`` fields it sets, and its
``prereg`` block. Anything else is refused, naming the file and the key, before Hydra composes
the config: a ``hydra:`` section (Hydra instantiates ``hydra.callbacks.*._target_`` as it
starts, so a registration could run any command), a defaults entry that selects ``/hydra/...``
groups, run settings (``paths``, ``mlflow``, ``out_dir`` ...), and a ``_target_`` that names
anything outside lmaudit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from lmaudit.errors import InputError
from lmaudit.provenance.io import read_utf8

#: the top-level keys a registration may set
DESIGN_KEYS = ("defaults", "model", "prereg", "study")
#: the config groups a registration's defaults list may select
DESIGN_GROUPS = ("/study", "/model", "study", "model")


def _targets(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            where = f"{path}.{k}" if path else str(k)
            if k == "_target_":
                yield where, v
            yield from _targets(v, where)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _targets(v, f"{path}[{i}]")


def check_registration(path: Path) -> None:
    """Refuse ``path`` (InputError naming it and the offending key) unless it sets only a
    study's design and predictions."""
    try:
        doc = yaml.safe_load(read_utf8(path))
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not valid YAML: {e}") from None
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise InputError(f"{path}: a registration is a YAML mapping, not {type(doc).__name__}")
    extra = sorted(str(k) for k in doc if k not in DESIGN_KEYS)
    if extra:
        raise InputError(
            f"{path}: a registration sets only {', '.join(DESIGN_KEYS)} (the study's design and its "
            f"predictions); it sets {', '.join(extra)}"
        )
    for i, entry in enumerate(doc.get("defaults") or []):
        if entry == "_self_":
            continue
        group = next(iter(entry), "") if isinstance(entry, dict) and len(entry) == 1 else None
        name = str(group).removeprefix("override ").strip() if group is not None else ""
        if not name.split("@")[0].startswith(DESIGN_GROUPS) or not isinstance(entry[group], str):
            raise InputError(
                f"{path}: defaults[{i}] = {entry!r}: a registration's defaults may select only "
                "/study and /model options"
            )
    for where, target in _targets(doc, ""):
        if not (isinstance(target, str) and target.startswith("lmaudit.")):
            raise InputError(
                f"{path}: {where} = {target!r}: a registration may instantiate nothing outside lmaudit"
            )


def check_registrations(folder: Path) -> None:
    """:func:`check_registration` for every registration in ``folder`` (``conf/prereg``)."""
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else ():
        check_registration(path)
