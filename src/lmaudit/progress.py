"""Progress bars that show a time left only once it means something.

A run's first units carry what later ones do not (a model warming up, a prefix computed once,
the first of few long units): a time left extrapolated from them can be wrong by hours. A
:class:`SettledBar` is a tqdm bar that shows its count, elapsed time and rate from the start,
and its time left only once ``settle`` units have been done by this bar (units found done at
its start, ``initial``, do not count): at least ``settle_min``, and ``settle_share`` of the
work left at its start. It changes tqdm's format through ``format_dict``, tqdm's documented
extension point for custom formats.
"""

from __future__ import annotations

import math
from typing import Any

from tqdm.auto import tqdm

__all__ = ["NO_ETA", "SettledBar"]

#: tqdm's default format without the time left
NO_ETA = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"


class SettledBar(tqdm):
    """A tqdm bar (keyword arguments as tqdm's) whose time left waits until the rate settles."""

    def __init__(self, *args: Any, settle_min: int = 2, settle_share: float = 0.05, **kwargs: Any) -> None:
        # set before tqdm's __init__, which may draw the bar
        self._start = int(kwargs.get("initial") or 0)
        todo = max(0, int(kwargs.get("total") or 0) - self._start)
        self.settle = max(settle_min, math.ceil(settle_share * todo))
        super().__init__(*args, **kwargs)

    @property
    def format_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = super().format_dict
        if d.get("bar_format") is None and self.n - self._start < self.settle:
            d["bar_format"] = NO_ETA
        return d
