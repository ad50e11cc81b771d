"""Axes of :mod:`lmaudit.svgplot`: their ranges, maps to the plot area, ticks and tick labels."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["MINUS", "Axis", "decade_label", "linear_ticks", "log_ticks", "number_label"]

MINUS = "\u2212"
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def linear_ticks(lo: float, hi: float, most: int = 8) -> list[float]:
    """Round tick values in ``[lo, hi]``: steps of 1, 2, 2.5 or 5 times a power of ten, the
    smallest giving at most ``most`` ticks."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise ValueError(f"tick range must be finite and increasing, got [{lo}, {hi}]")
    raw = (hi - lo) / max(most - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        step = m * power
        first = math.ceil(lo / step - 1e-9)
        last = math.floor(hi / step + 1e-9)
        if last - first + 1 <= most:
            break
    digits = max(0, 3 - math.floor(math.log10(step)))  # k * step without its rounding error
    return [0.0 if k == 0 else round(k * step, digits) for k in range(first, last + 1)]


def log_ticks(lo: float, hi: float, most: int = 9) -> list[float]:
    """Powers of ten in ``[lo, hi]``, every ``n``-th decade (``n`` the smallest giving at most
    ``most``), the stride anchored at ``10⁰`` so that 1 is a tick when in range."""
    if not (0 < lo < hi and math.isfinite(hi)):
        raise ValueError(f"a log axis needs 0 < lo < hi, got [{lo}, {hi}]")
    e0, e1 = math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9)
    stride = 1
    while len(range(e0, e1 + 1)) > most * stride:
        stride += 1
    return [10.0**e for e in range(e0, e1 + 1) if e % stride == 0]


def decade_label(x: float) -> str:
    """``10⁻ⁿ`` in plain text (``1`` for 10⁰)."""
    e = round(math.log10(x))
    return "1" if e == 0 else "10" + str(e).translate(_SUPERSCRIPT)


def number_label(ticks: Sequence[float]) -> Callable[[float], str]:
    """Tick labels with as many decimals as the ticks' step needs (a true minus sign)."""
    step = min((b - a for a, b in itertools.pairwise(ticks)), default=1.0)
    decimals = 0
    while decimals < 10 and abs(round(step, decimals) - step) > 1e-9 * max(abs(step), 1.0):
        decimals += 1

    def label(v: float) -> str:
        return f"{v:.{decimals}f}".replace("-", MINUS) if round(v, decimals) != 0 else f"{0:.{decimals}f}"

    return label


@dataclass(frozen=True)
class Axis:
    """One axis: its range, linear or base-10 log, its ticks (``None``: round values, or the
    decades of a log axis), their labels (``None``: formatted from the ticks) and its title."""

    lo: float = 0.0
    hi: float = 1.0
    log: bool = False
    ticks: Sequence[float] | None = None
    labels: Sequence[str] | None = None
    title: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo < self.hi):
            raise ValueError(f"axis range must be finite and increasing, got [{self.lo}, {self.hi}]")
        if self.log and self.lo <= 0:
            raise ValueError(f"a log axis needs a positive range, got [{self.lo}, {self.hi}]")

    def shown(self, v: float) -> bool:
        """Whether ``v`` has a place on this axis (finite; positive on a log axis)."""
        return math.isfinite(v) and (v > 0 or not self.log)

    def unit(self, v: float) -> float:
        """``v`` as a share of the axis (0 at ``lo``, 1 at ``hi``)."""
        if self.log:
            return (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        return (v - self.lo) / (self.hi - self.lo)

    def tick_marks(self) -> list[tuple[float, str]]:
        ticks = None if self.ticks is None else list(self.ticks)
        if ticks is None:
            ticks = log_ticks(self.lo, self.hi) if self.log else linear_ticks(self.lo, self.hi)
        if self.labels is not None:
            if len(self.labels) != len(ticks):
                raise ValueError(f"{len(self.labels)} tick labels for {len(ticks)} ticks")
            return list(zip(ticks, self.labels, strict=True))
        fmt = decade_label if self.log else number_label(ticks)
        return [(t, fmt(t)) for t in ticks]
