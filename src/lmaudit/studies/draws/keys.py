"""Family names as MLflow metric and tag keys take them (:func:`metric_key`), and the check
that no two families share a key (:func:`check_metric_keys`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from lmaudit.errors import InputError
from lmaudit.text import metric_safe

__all__ = ["check_metric_keys", "metric_key"]


#: the longest key kept as it is (MLflow keys hold 250 characters, a metric's suffix included)
_MAX_KEPT = 200


def _path_safe(key: str) -> bool:
    """Whether MLflow takes ``key`` as a path: no empty, ``.`` or ``..`` part and no leading dot
    (it refuses a key that is not its own normalised path: ``/data/m``, ``a//b``, ``a/../b``,
    ``..x``, ``x/``)."""
    if not key or len(key) > _MAX_KEPT or key.startswith("."):
        return False
    return all(part not in ("", ".", "..") for part in key.split("/"))


def metric_key(name: str) -> str:
    """A family's name as MLflow metric and tag keys take it: characters MLflow refuses become
    ``_``, and names of safe characters keep their name (so ``dvc metrics`` keys stay put).
    A key that is still no safe path (``/data/models/llama-3-8b``, ``a//b``, ``a/../b``, longer
    than 200 characters) becomes one, stable and distinct per name: its empty and dot-only
    parts dropped, each part stripped of leading and trailing dots and spaces, then ``-`` and
    the first 8 hex digits of the name's SHA-256 (``data/models/llama-3-8b-<digest>``); the
    name itself is tag ``family_name.<key>``. Names that would share a key are refused before
    analysis (:func:`check_metric_keys`)."""
    key = metric_safe(name)
    if _path_safe(key):
        return key
    parts = (part.strip(". ") for part in key.split("/"))
    readable = "/".join(part for part in parts if part)[:_MAX_KEPT].strip("/. ")
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable}-{digest}" if readable else f"family-{digest}"


def check_metric_keys(names: Iterable[str]) -> None:
    """InputError naming the families whose metric keys would collide (e.g. ``a<b``, ``a>b``)."""
    by_key: dict[str, list[str]] = {}
    for n in sorted(set(names)):
        by_key.setdefault(metric_key(n), []).append(n)
    clashes = {k: v for k, v in by_key.items() if len(v) > 1}
    if clashes:
        shown = "; ".join(f"{', '.join(map(repr, v))} -> {k!r}" for k, v in sorted(clashes.items()))
        raise InputError(
            f"field 'family': families whose names differ only in characters metric keys cannot "
            f"hold would share a metric key ({shown}); rename one of them"
        )
