"""Did-you-mean for names typed on the command line: config keys and option values.

A name is matched by its spelling first (``epsilonn`` -> ``epsilon``, ``analyse`` ->
``analyze``), then by the last part of a dotted name (``nn`` -> ``gates.g3.n``), then as a
name cut short (``temp`` -> ``temperature``), then by a word it shares with a real name
(``n_draws`` -> ``n``)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

__all__ = ["did_you_mean", "suggestions"]


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", name.lower()) if w}


def suggestions(word: str, options: Sequence[str], n: int = 2) -> list[str]:
    """Up to ``n`` of ``options`` closest to ``word``; empty when none is close."""
    opts = list(dict.fromkeys(str(o) for o in options))
    close = difflib.get_close_matches(word, opts, n=n, cutoff=0.6)
    if close:
        return close
    leaf = {o: o.rsplit(".", 1)[-1] for o in opts}
    near = set(difflib.get_close_matches(word, sorted(set(leaf.values())), n=n, cutoff=0.6))
    if near:
        return [o for o in opts if leaf[o] in near][:n]
    low = word.lower()
    if len(low) >= 3:  # a name cut short (``temp`` -> ``temperature``)
        cut = [o for o in opts if leaf[o].lower().startswith(low)]
        if cut:
            return cut[:n]
    words = _words(word)
    return [o for o in opts if leaf[o].lower() in words][:n]


def did_you_mean(word: str, options: Sequence[str]) -> str:
    """``"; did you mean <closest>?"`` (two when two are as close), or nothing when none is."""
    found = suggestions(word, options)
    return f"; did you mean {' or '.join(found)}?" if found else ""
