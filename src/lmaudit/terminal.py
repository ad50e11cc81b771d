"""Text printed to a terminal with its control characters escaped.

Names lmaudit prints come from data others wrote (a family, source, model or file name in an
imported log); a control character in one would be obeyed by the terminal: an ESC sequence
sets the window title, clears the screen or writes the clipboard (OSC 52). :func:`printable`
shows every C0 control (``\\x00``-``\\x1f``, ESC among them), DEL and every C1 control
(``\\x80``-``\\x9f``) as its escape (``\\n``, ``\\r``, ``\\t``, else ``\\xNN``), so what a line
holds is seen, never obeyed. Every summary, warning and error line lmaudit prints passes
through it.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or f"\\x{ord(c):02x}"


def printable(text: str) -> str:
    """``text`` with its control characters (C0, DEL, C1) shown as escapes."""
    return _CONTROL.sub(_escape, text)
