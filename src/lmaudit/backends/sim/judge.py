"""The ``judge`` sim agent: a pairwise LLM judge with planted, known presentation effects.

It reads request ``meta`` (``item``, ``swap``, ``wrap``; in a shared conversation also
``history``), never a model mapping. For prompt ``item`` the content preference is a latent
logit ``d`` (original response A over B): ``quality`` if given for the item, else
``content_sd * z`` with ``z`` a standard normal drawn from ``(seed, item)``. What the judge
sees as Response A is preferred by the logit

    z = (-d if swap else d) + position_bias + (attraction - aversion) * (wrapped_A - wrapped_B)

and the verdict probabilities are ``P(A) = s((z - tie_margin) / noise)``,
``P(B) = s((-z - tie_margin) / noise)``, ``P(TIE) = 1 - P(A) - P(B)`` (``s`` the logistic
function; ``noise = 0`` makes the verdict deterministic: A if ``z > tie_margin``, B if
``z < -tie_margin``, else TIE). :meth:`probabilities` gives them in closed form.

Sampling: draw ``i`` uses only ``numpy.random.default_rng(derive_seed(seed, i))``: with
probability ``invalid_rate`` it writes an unparseable answer, else it writes
``WINNER/CONFIDENCE/REASON`` with the sampled winner and confidence ``max(P)`` to two decimals.
In a shared conversation (``meta["history"]``), with probability ``carryover`` it repeats
the verdict, confidence and reason it gave the same item earlier (re-oriented if the sides were
exchanged): the mechanism by which shared context suppresses disagreement.

Label log-probabilities: the request's labels are read in the order A, B, TIE; their
probabilities are scaled by ``1 - invalid_rate`` (the rest is ``other``).

Fields (all enter :attr:`identity`): :class:`SimJudgeFields`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np

from lmaudit.backends.base import LabelRequest, LabelResult, SampleRequest, derive_seed
from lmaudit.backends.sim.base import SimAgent
from lmaudit.backends.sim.fields import AgentFields, Check, NonNegative, Unit, hashed_rng, mapping, number
from lmaudit.errors import BackendError

__all__ = ["SIM_JUDGE_VERSION", "SimJudge"]

SIM_JUDGE_VERSION = "judge-sim/1"
_OVERRIDABLE = ("quality", "position_bias", "wrapper_attraction", "wrapper_aversion")
_VERDICT = re.compile(r"WINNER: (A|B|TIE)\nCONFIDENCE: ([0-9.]+)\nREASON: (.*)")
_REASONS = {
    "A": "Response A answers the prompt more correctly and completely.",
    "B": "Response B answers the prompt more correctly and completely.",
    "TIE": "Both responses are substantively equivalent in quality.",
}
_INVALID_TEXT = "Both have merits; I lean toward the first one overall."


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _items(
    agent: SimAgent, name: str, value: Mapping[str, Any] | None, earlier: Any
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for item, given in mapping(agent.name, name, value).items():
        over = mapping(agent.name, f"{name}.{item}", given)
        bad = sorted(set(over) - set(_OVERRIDABLE))
        if bad:
            raise ValueError(
                f"sim agent {agent.name!r}: {name}.{item}: unknown field(s) {bad} (allowed: {_OVERRIDABLE})"
            )
        out[str(item)] = {k: number(agent.name, f"{name}.{item}.{k}", v) for k, v in over.items()}
    return out


@dataclass(frozen=True, kw_only=True)
class SimJudgeFields(AgentFields):
    """The ``judge`` agent's parameters."""

    seed: int = 0  # the content logits d drawn from (seed, item)
    position_bias: float = 0.0  # logit toward the displayed Response A
    wrapper_attraction: NonNegative = 0.0  # logit toward a wrapped response
    wrapper_aversion: NonNegative = 0.0  # logit away from a wrapped response
    noise: NonNegative = 1.0  # logistic verdict noise (0: deterministic verdicts)
    content_sd: NonNegative = 2.0  # sd of the drawn content logit d
    tie_margin: NonNegative = 0.5  # a logit within it of 0 favours TIE
    invalid_rate: Unit = 0.0  # probability of an unparseable answer
    carryover: Unit = 0.0  # probability of repeating an earlier verdict in a shared conversation
    # prompt id -> overrides of quality, position_bias, wrapper_attraction, wrapper_aversion
    items: Annotated[dict[str, dict[str, float]], Check(_items)] = field(default_factory=dict)


class SimJudge(SimAgent[SimJudgeFields]):
    """Both contracts: :meth:`sample` (verdict texts) and :meth:`label_logprobs` (A/B/TIE)."""

    name = "judge"
    version = SIM_JUDGE_VERSION

    # -- the model -------------------------------------------------------------------------
    def _param(self, item: str, name: str) -> float:
        return float(self.fields.items.get(item, {}).get(name, getattr(self.fields, name)))

    def quality(self, item: str) -> float:
        """The latent content logit ``d`` of original response A over B."""
        if "quality" in self.fields.items.get(item, {}):
            return self.fields.items[item]["quality"]
        return self.fields.content_sd * float(
            hashed_rng(self.fields.seed, "judge-quality", item).standard_normal()
        )

    def logit(self, item: str, *, swap: bool, wrap: set[str] | frozenset[str]) -> float:
        d = self.quality(item)
        w = self._param(item, "wrapper_attraction") - self._param(item, "wrapper_aversion")
        return (-d if swap else d) + self._param(item, "position_bias") + w * (("A" in wrap) - ("B" in wrap))

    def probabilities(self, item: str, *, swap: bool, wrap: set[str] | frozenset[str]) -> dict[str, float]:
        """Closed-form verdict probabilities for the displayed sides (among valid verdicts)."""
        z, t = self.logit(item, swap=swap, wrap=wrap), self.fields.tie_margin
        if self.fields.noise == 0.0:
            w = "A" if z > t else "B" if z < -t else "TIE"
            return {k: float(k == w) for k in ("A", "B", "TIE")}
        pa, pb = _sigmoid((z - t) / self.fields.noise), _sigmoid((-z - t) / self.fields.noise)
        return {"A": pa, "B": pb, "TIE": max(0.0, 1.0 - pa - pb)}

    @staticmethod
    def _meta(request: SampleRequest | LabelRequest) -> tuple[str, bool, frozenset[str]]:
        m = request.meta
        if "item" not in m:
            raise BackendError("sim agent 'judge': request meta has no 'item'")
        return str(m["item"]), bool(m.get("swap", False)), frozenset(str(w) for w in m.get("wrap") or [])

    # -- contracts -------------------------------------------------------------------------
    def _carried(self, request: SampleRequest, item: str, swap: bool) -> str | None:
        history = list(request.meta.get("history") or [])
        answers = [m["content"] for m in request.messages if m.get("role") == "assistant"]
        for turn, text in reversed(list(zip(history, answers, strict=False))):
            if str(turn.get("item")) != item:
                continue
            hit = _VERDICT.fullmatch(text)
            if hit is None:
                continue
            w = hit.group(1)
            if bool(turn.get("swap", False)) != swap and w != "TIE":
                w = "B" if w == "A" else "A"
            return f"WINNER: {w}\nCONFIDENCE: {hit.group(2)}\nREASON: {hit.group(3)}"
        return None

    def _draw(self, request: SampleRequest, i: int) -> str:
        item, swap, wrap = self._meta(request)
        u_invalid, u_carry, u_winner = np.random.default_rng(derive_seed(request.seed, i)).random(3)
        if u_carry < self.fields.carryover:
            carried = self._carried(request, item, swap)
            if carried is not None:
                return carried
        if u_invalid < self.fields.invalid_rate:
            return _INVALID_TEXT
        p = self.probabilities(item, swap=swap, wrap=wrap)
        cum = np.cumsum([p["A"], p["B"], p["TIE"]])
        w = ("A", "B", "TIE")[min(int(np.searchsorted(cum, u_winner * cum[-1], side="right")), 2)]
        return f"WINNER: {w}\nCONFIDENCE: {max(p.values()):.2f}\nREASON: {_REASONS[w]}"

    def draws(self, request: SampleRequest) -> list[str]:
        return [self._draw(request, i) for i in range(request.n)]

    def label_logprobs(self, requests: list[LabelRequest], top_k: int = 10) -> list[LabelResult]:
        out = []
        for r in requests:
            if len(r.labels) != 3:
                raise BackendError(f"sim agent 'judge': expected 3 labels (A, B, TIE), got {r.labels}")
            item, swap, wrap = self._meta(r)
            p = self.probabilities(item, swap=swap, wrap=wrap)
            keep = 1.0 - self.fields.invalid_rate
            probs = {lab: keep * p[v] for lab, v in zip(r.labels, ("A", "B", "TIE"), strict=True)}
            other = max(0.0, 1.0 - sum(probs.values()))
            top = sorted([*probs.items(), ("<other>", other)], key=lambda kv: -kv[1])[: max(0, top_k)]
            out.append(LabelResult(probs=probs, other=other, top_k=top))
        return out

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        return {label: [label] for label in request.labels}
