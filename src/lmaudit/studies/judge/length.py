"""Length bias of an imported judge: pure, measurement rows in, the results' ``length`` section
out (docs/interop.md, "Judge", "Length").

Rows whose ``pair`` carries ``lengths`` (each answer's characters and words, recorded by the
FastChat and AlpacaEval readers where the file holds the answers) are read:

* ``longer_wins``: among decisive verdicts (A or B) on answers of unequal length, the share won
  by the longer answer, with the exact two-sided binomial test against 1/2 and the
  Clopper-Pearson interval; in characters (primary) and in words (sensitivity).
* ``length_controlled``: per model, a logistic regression of its decisive verdicts (won 1, lost
  0) on the length difference (its answer minus the other's, in thousands of characters), read
  at zero difference: sigmoid(intercept), the win rate an answer of the same length as its
  opponent's would get (the idea of length-controlled AlpacaEval, Dubois et al. 2024, arXiv
  2404.04475, with the length term alone), beside the model's raw share of decisive verdicts won.
  Verdicts of one pair in both orders are not independent: the fit describes the verdicts.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lmaudit.stats.intervals import proportion_ci
from lmaudit.studies.judge.disagreement import exact_interval, sign_test
from lmaudit.studies.judge.import_sections import LengthControlled, LengthSection, LongerWins, ModelLength

__all__ = ["UNITS", "LengthVerdict", "length_controlled", "length_section", "longer_wins", "verdicts_of"]

UNITS = ("chars", "words")
SCALE = 1000.0  # characters per unit of the regression's length difference


@dataclass(frozen=True)
class LengthVerdict:
    """One valid verdict on a pair whose answers' lengths are known (original orientation)."""

    winner: str  # A, B or TIE
    model_a: str
    model_b: str
    length_a: Mapping[str, int]  # chars, words
    length_b: Mapping[str, int]


def verdicts_of(rows: Iterable[Mapping[str, Any]]) -> list[LengthVerdict]:
    """The valid final verdicts whose pair records both answers' lengths."""
    out = []
    for r in rows:
        pair = r.get("pair") or {}
        lengths = pair.get("lengths")
        if r.get("kind") != "judgment" or not r.get("final") or not r.get("valid") or not lengths:
            continue
        models = pair.get("models") or {}
        out.append(
            LengthVerdict(
                winner=str(r["winner_original"]),
                model_a=str(models.get("A")),
                model_b=str(models.get("B")),
                length_a=lengths["A"],
                length_b=lengths["B"],
            )
        )
    return out


def longer_wins(verdicts: Sequence[LengthVerdict], unit: str, alpha: float) -> LongerWins:
    """Decisive verdicts on answers of unequal length (in ``unit``) won by the longer answer."""
    longer = n = equal = 0
    for v in verdicts:
        if v.winner not in ("A", "B"):
            continue
        a, b = v.length_a[unit], v.length_b[unit]
        if a == b:
            equal += 1
            continue
        n += 1
        longer += (v.winner == "A") == (a > b)
    ci = proportion_ci(longer, n, alpha)
    return LongerWins(
        decisive_unequal=n,
        equal_length=equal,
        longer_won=longer,
        rate=ci.estimate,
        p_value=sign_test(longer, n - longer),
        ci=exact_interval(ci),
        test="exact two-sided binomial, p = 1/2",
    )


def _fit(x: Sequence[float], y: Sequence[int]) -> tuple[float, float] | str:
    """(intercept, slope) of the unpenalised logistic regression of y on x, or why there is none."""
    if len(set(y)) < 2:
        return "every verdict went the same way"
    if len(set(x)) < 2:
        return "every verdict has the same length difference"
    won = [a for a, b in zip(x, y, strict=True) if b]
    lost = [a for a, b in zip(x, y, strict=True) if not b]
    if min(won) >= max(lost) or max(won) <= min(lost):  # no finite maximum-likelihood fit
        return "the length difference separates wins from losses (no finite fit)"
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        try:
            m = LogisticRegression(C=np.inf, max_iter=1000).fit(np.asarray(x, dtype=float)[:, None], y)
        except ConvergenceWarning:
            return "the fit does not converge"
    return float(m.intercept_[0]), float(m.coef_[0, 0])


def length_controlled(verdicts: Sequence[LengthVerdict]) -> LengthControlled:
    """Per model: its decisive verdicts, raw share won, and the win rate read at zero length
    difference from the logistic regression on the difference in thousands of characters."""
    data: dict[str, tuple[list[float], list[int]]] = {}
    for v in verdicts:
        if v.winner not in ("A", "B"):
            continue
        for side, model, mine, theirs in (
            ("A", v.model_a, v.length_a, v.length_b),
            ("B", v.model_b, v.length_b, v.length_a),
        ):
            xs, ys = data.setdefault(model, ([], []))
            xs.append((mine["chars"] - theirs["chars"]) / SCALE)
            ys.append(int(v.winner == side))
    models: dict[str, ModelLength] = {}
    for m in sorted(data):
        xs, ys = data[m]
        fit = _fit(xs, ys)
        decisive, won = len(ys), sum(ys)
        if isinstance(fit, str):
            models[m] = ModelLength(
                decisive=decisive,
                won=won,
                win_rate=won / decisive,
                evaluable=False,
                reason=fit,
                length_controlled=None,
                slope_per_1000_chars=None,
            )
        else:
            b0, b1 = fit
            models[m] = ModelLength(
                decisive=decisive,
                won=won,
                win_rate=won / decisive,
                evaluable=True,
                length_controlled=1.0 / (1.0 + math.exp(-b0)),
                slope_per_1000_chars=b1,
            )
    return LengthControlled(
        model="logit P(win) = b0 + b1 * (own - other length) / 1000 characters; read at 0: 1 / (1 + exp(-b0))",
        models=models,
    )


def length_section(rows: Iterable[Mapping[str, Any]], alpha: float) -> LengthSection | None:
    """The ``length`` section, or ``None`` when no verdict's pair records its answers' lengths."""
    verdicts = verdicts_of(rows)
    if not verdicts:
        return None
    return LengthSection(
        verdicts=len(verdicts),
        decisive=sum(v.winner in ("A", "B") for v in verdicts),
        primary="chars",
        longer_wins={u: longer_wins(verdicts, u, alpha) for u in UNITS},
        length_controlled=length_controlled(verdicts),
    )
