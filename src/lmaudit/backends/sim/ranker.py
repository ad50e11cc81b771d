"""The ``ranker`` sim evaluator: source-blind ranking ballots with a planted preference (choir
ground truth for the ranking module).

A ranking request's ``meta["candidates"]`` lists the shown candidates (``label``, ``source``,
``pool``, ``text``) in the order shown; ``meta["persona"]`` is ``none`` for the unconditioned
cohort. Each candidate gets the score

    conditioned_preference * [source is conditioned]
    + persona_preference * [source is conditioned and the ballot has a persona]
    + rare_preference * [pool is a rare pool]
    + taste * z(text) + noise * g

where ``z(text)`` is a standard normal fixed by the text and ``seed`` (a taste every evaluator
with the same ``seed`` shares: it makes cohorts agree) and ``g`` a standard Gumbel draw of the
ballot (a generator seeded by ``derive_seed(request.seed, i)`` and ``seed``). The ranking is the
candidates by decreasing score, written as ``C > A > B`` (``style: chain``), a numbered list of
letters and texts (``numbered``), or either with a sentence around it (``chatty``). With
probability ``invalid`` the answer is a refusal with no ranking. Temperature is ignored.

A finalist-stage request (``meta["kind"] == "finalists"``) shows sets: each candidate has
``texts`` (its finalists) instead of ``text``. A set is scored as above with ``z`` the mean of its
texts' tastes, and with ``finalist_conditioned_preference`` and ``finalist_persona_preference``
in place of the stage-1 preferences when given; the answer names sets (``Set B > Set A``,
``1. Set B``).

Fields (all enter :attr:`identity`, the finalist preferences only when given):
:class:`RankingFields`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np

from lmaudit.backends.base import SampleRequest, derive_seed
from lmaudit.backends.sim.base import SimAgent
from lmaudit.backends.sim.fields import OMITTED_IF_NONE, AgentFields, NonNegative, Unit, hashed_rng
from lmaudit.errors import BackendError

__all__ = ["SIM_RANKER_VERSION", "RankingSampler"]

SIM_RANKER_VERSION = "ranker-sim/1"
Style = Literal["chain", "numbered", "chatty"]


@dataclass(frozen=True, kw_only=True)
class RankingFields(AgentFields):
    """The ``ranker`` agent's parameters."""

    seed: int = 0  # the shared tastes z(text) and the ballots' noise
    conditioned_preference: float = 1.0  # score of a conditioned source (negative: unconditioned)
    persona_preference: float = 0.0  # extra score of a conditioned source on a persona ballot
    rare_preference: float = 0.0  # score of a candidate from a rare pool
    taste: NonNegative = 0.5  # weight of the shared taste z(text)
    noise: NonNegative = 1.0  # scale of each ballot's Gumbel noise
    style: Style = "chain"  # how the ranking is written
    invalid: Unit = 0.0  # probability of a refusal with no ranking
    # the finalist stage's preferences (None: the stage-1 values; then not in the identity)
    finalist_conditioned_preference: Annotated[float | None, OMITTED_IF_NONE] = None
    finalist_persona_preference: Annotated[float | None, OMITTED_IF_NONE] = None


class RankingSampler(SimAgent[RankingFields]):
    """Sampling contract only; reads ``meta`` (candidates, persona)."""

    name = "ranker"
    version = SIM_RANKER_VERSION

    def _taste(self, text: str) -> float:
        return float(hashed_rng(self.fields.seed, "taste", text).standard_normal())

    def draws(self, request: SampleRequest) -> list[str]:
        cands = request.meta.get("candidates")
        if not isinstance(cands, list) or not cands:
            raise BackendError("sim agent 'ranker': request meta has no 'candidates' (not a ranking request)")
        persona = str(request.meta.get("persona", "none")) != "none"
        sets = request.meta.get("kind") == "finalists"
        f = self.fields
        cond, pers = f.conditioned_preference, f.persona_preference
        if sets:
            fc, fp = f.finalist_conditioned_preference, f.finalist_persona_preference
            cond, pers = (cond if fc is None else fc), (pers if fp is None else fp)
        base = np.array(
            [
                (cond + pers * persona) * (c["source"] == "conditioned")
                + self.fields.rare_preference * str(c["pool"]).endswith("rare")
                + self.fields.taste
                * (
                    float(np.mean([self._taste(str(t)) for t in c["texts"]]))
                    if sets
                    else self._taste(str(c["text"]))
                )
                for c in cands
            ]
        )
        noun = "Set " if sets else ""
        texts = []
        for i in range(request.n):
            rng = np.random.default_rng([derive_seed(request.seed, i), self.fields.seed])
            if rng.random() < self.fields.invalid:
                texts.append("I cannot rank these answers; they all have merit.")
                continue
            score = base + self.fields.noise * rng.gumbel(size=len(cands))
            order = [cands[j] for j in np.argsort(-score, kind="stable")]
            if self.fields.style == "numbered":
                texts.append(
                    "\n".join(
                        f"{k}. {noun}{c['label']}" + ("" if sets else f". {c['text']}")
                        for k, c in enumerate(order, 1)
                    )
                )
            else:
                chain = " > ".join(noun + c["label"] for c in order)
                texts.append(
                    chain
                    if self.fields.style == "chain"
                    else f"Here is my ranking:\n\n**{chain}**\n\nThanks!"
                )
        return texts
