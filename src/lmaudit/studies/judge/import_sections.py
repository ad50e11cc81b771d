"""The sections of the judge's typed results that imported pairwise verdicts add (FastChat,
AlpacaEval): ``order_swap`` (position bias from pairs judged in both orders, or once in a
random order) and ``length`` (where the file holds the answers). :mod:`.results` assembles
them."""

from __future__ import annotations

from typing import Annotated

from lmaudit.results import OMIT_NONE, JsonRecord
from lmaudit.studies.judge.sections import ExactInterval
from lmaudit.text import metrics_under

__all__ = [
    "ExactBinomialTest",
    "Flipped",
    "LengthControlled",
    "LengthSection",
    "LongerWins",
    "ModelLength",
    "ModelWinRate",
    "OrderSwap",
    "PairBlock",
    "PairCounts",
    "PerVerdict",
    "PositionConsistency",
    "PreferenceFairness",
    "Randomized",
    "Unpaired",
    "WinRates",
]

# --- order swap (imported pairwise verdicts) -------------------------------------------


class PairCounts(JsonRecord):
    n: int
    consistent: int
    first_both: int
    second_both: int
    one_tie: int
    invalid: int


class BinomialReading(JsonRecord, kw_only=True):
    """A first-position win rate with its exact interval and two-sided binomial p (1/2)."""

    n: int
    rate: float | None
    ci: ExactInterval
    p: float
    test: str


class Flipped(BinomialReading, kw_only=True):
    first_both: int


class PerVerdict(BinomialReading, kw_only=True):
    first: int
    second: int


class PositionConsistency(JsonRecord):
    consistent: int
    n: int
    rate: float | None
    ci: ExactInterval


class PreferenceFairness(JsonRecord):
    value: float | None
    primacy: int
    recency: int
    raw: float
    n: int
    invalid: int


class PairBlock(JsonRecord, kw_only=True):
    """One group of pairs judged in both orders: counts, both readings of the first-position
    win rate, Shi et al.'s position consistency and preference fairness."""

    counts: PairCounts
    flipped: Flipped
    per_verdict: PerVerdict
    position_consistency: PositionConsistency
    preference_fairness: PreferenceFairness


class Unpaired(JsonRecord):
    order_1_only: int
    order_2_only: int


class ExactBinomialTest(JsonRecord, kw_only=True):
    """A share of decisive verdicts (``rate``) with its exact interval and the exact two-sided
    binomial test of 1/2 (``p_value``; the paired blocks' :class:`BinomialReading` writes it
    as ``p``)."""

    rate: float | None
    p_value: float
    ci: ExactInterval
    test: str

    def metrics(self, prefix: str, rate: str = "rate") -> dict[str, float]:
        """``{prefix}.{rate}`` (left out when no verdict was decisive), ``.ci_low``,
        ``.ci_high`` and ``.p``."""
        return metrics_under(
            prefix, **{rate: self.rate}, ci_low=self.ci.low, ci_high=self.ci.high, p=self.p_value
        )


class Randomized(ExactBinomialTest, kw_only=True):
    """Pairs judged once, in a recorded random order: first-position wins among the decisive."""

    verdicts: int
    order_1: int
    order_2: int
    ties: int
    invalid: int
    decisive: int
    first_wins: int
    assumption: str


class ModelWinRate(JsonRecord, kw_only=True):
    pairs: int
    shown_first_in_order_1: int
    balanced: float
    order_1: float
    order_2: float
    order_1_minus_order_2: float


class WinRates(JsonRecord):
    """Each model's win rate over pairs valid in both orders: balanced, and each order alone."""

    scoring: str
    pairs: int
    models: dict[str, ModelWinRate]
    ranking: dict[str, tuple[tuple[str, ...], ...]]
    ranking_changes: bool


class OrderSwap(PairBlock, kw_only=True):
    """Position bias from imported pairs (the overall block, then per judge prompt, model pair
    and turn); ``randomized`` where pairs were judged in one order, ``win_rates`` in both."""

    orders: dict[str, str]
    first_position_win: str
    primary: str
    secondary: str
    alpha: float
    unpaired: Unpaired
    by_judge_prompt: dict[str, PairBlock]
    by_model_pair: dict[str, PairBlock]
    by_turn: dict[str, PairBlock]
    randomized: Annotated[Randomized | None, OMIT_NONE] = None
    win_rates: Annotated[WinRates | None, OMIT_NONE] = None

    def groups(self) -> list[tuple[str, str, dict[str, PairBlock]]]:
        """(metric prefix, the report's heading, blocks by name) for each grouping of pairs."""
        return [
            ("prompt", "judge prompt", self.by_judge_prompt),
            ("turn", "turn", self.by_turn),
            ("pair", "model pair", self.by_model_pair),
        ]


# --- length (imported verdicts whose file holds the answers) ----------------------------


class LongerWins(ExactBinomialTest, kw_only=True):
    """The longer answer's wins among decisive verdicts between answers of unequal length."""

    decisive_unequal: int
    equal_length: int
    longer_won: int


class ModelLength(JsonRecord, kw_only=True):
    decisive: int
    won: int
    win_rate: float
    evaluable: bool
    reason: Annotated[str | None, OMIT_NONE] = None
    length_controlled: float | None
    slope_per_1000_chars: float | None


class LengthControlled(JsonRecord):
    model: str
    models: dict[str, ModelLength]


class LengthSection(JsonRecord):
    verdicts: int
    decisive: int
    primary: str
    longer_wins: dict[str, LongerWins]  # unit (chars, words) -> reading
    length_controlled: LengthControlled
