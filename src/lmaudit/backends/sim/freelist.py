"""The ``freelist`` sim generator: ranked free lists with planted structure (choir ground truth).

Each question ``q`` (``meta["question"]``) has a pool of concepts whose size is its planted
width (``widths[q]``, else 8-60 from a hash of ``q``). A concept is a short phrase of
pseudo-words of its own, the same for every model, written with a random leading filler word
(a paraphrase: the same concept clusters together under any bag-of-words embedding).

A list of ``meta["items"]`` entries (default 25) is drawn without replacement (Plackett-Luce)
with weights ``w_c = zipf(c) * exp(signature_strength * z[signature, q, c]) *
exp(persona_strength * [c in P(persona, q)])`` raised to ``1 / temperature``: ``z`` is a
standard normal draw per (signature, question, concept), so models with different
``signature`` values prefer different concepts; ``P`` is a persona's boosted share of the
pool (``persona_share``), the same for every model, so a persona raises cross-model agreement;
``meta["persona"] == "none"`` boosts nothing. With probability ``echo`` an entry is one of
the question's own words instead (prompt echo); with probability ``leak`` (conditioned lists)
a content word of the persona profile, read from the system turn (profile leakage). Draw ``i`` uses only a generator seeded by
``derive_seed(request.seed, i)``.

Fields (all enter :attr:`identity`): :class:`FreeListFields`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np

from lmaudit.backends.base import SampleRequest, derive_seed
from lmaudit.backends.sim.base import SimAgent
from lmaudit.backends.sim.fields import AgentFields, Check, NonNegative, Unit, count, hashed_rng, mapping
from lmaudit.errors import BackendError
from lmaudit.text import question_words

__all__ = ["SIM_FREELIST_VERSION", "FreeListSampler"]

SIM_FREELIST_VERSION = "freelist-sim/1"
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bu", "da", "fe", "gi", "ho", "ju", "pe")
_FILLERS = ("the", "a", "key", "core", "main")


def _widths(agent: SimAgent, name: str, value: Mapping[str, Any] | None, earlier: Any) -> dict[str, int]:
    given = mapping(agent.name, name, value)
    return {str(k): count(agent.name, f"{name}.{k}", given[k], 2) for k in sorted(given, key=str)}


@dataclass(frozen=True, kw_only=True)
class FreeListFields(AgentFields):
    """The ``freelist`` agent's parameters."""

    seed: int = 0  # pools, widths, signature and persona draws
    signature: int = 0  # the model's own z[signature, q, c]
    signature_strength: NonNegative = 1.5  # weight of z in the log-weights
    persona_strength: NonNegative = 1.5  # log-weight boost of a persona's concepts
    persona_share: Unit = 0.2  # share of each pool a persona boosts
    echo: Unit = 0.0  # probability that an entry echoes a question word
    leak: Unit = 0.0  # probability that an entry leaks a persona-profile word
    zipf: NonNegative = 1.0  # base weights 1 / rank ** zipf
    # question -> pool size >= 2 (else 8-60 from a hash of the question), sorted by question
    widths: Annotated[dict[str, int], Check(_widths)] = field(default_factory=dict)


class FreeListSampler(SimAgent[FreeListFields]):
    """Sampling contract only; reads ``meta`` (question, question_text, persona, items)."""

    name = "freelist"
    version = SIM_FREELIST_VERSION

    def width(self, question: str) -> int:
        if question in self.fields.widths:
            return self.fields.widths[question]
        return int(hashed_rng(self.fields.seed, "width", question).integers(8, 61))

    def concepts(self, question: str) -> list[str]:
        """The question's concept pool (the same for every signature)."""
        rng = hashed_rng(self.fields.seed, "concepts", question)
        out = []
        for _ in range(self.width(question)):
            words = ["".join(rng.choice(_SYLLABLES, size=3)) for _ in range(3)]
            out.append(" ".join(words))
        return out

    def weights(self, question: str, persona: str, temperature: float) -> np.ndarray:
        k = self.width(question)
        base = 1.0 / np.arange(1, k + 1) ** self.fields.zipf
        z = hashed_rng(self.fields.seed, "signature", self.fields.signature, question).standard_normal(k)
        logw = np.log(base) + self.fields.signature_strength * z
        if persona and persona != "none":
            boosted = (
                hashed_rng(self.fields.seed, "persona", persona, question).random(k)
                < self.fields.persona_share
            )
            logw = logw + self.fields.persona_strength * boosted
        t = max(float(temperature), 1e-3)
        logw = logw / t
        w = np.exp(logw - logw.max())
        return w / w.sum()

    def draws(self, request: SampleRequest) -> list[str]:
        meta = request.meta
        if "question" not in meta:
            raise BackendError("sim agent 'freelist': request meta has no 'question'")
        question = str(meta["question"])
        words = question_words(str(meta.get("question_text", question))) or ["answer"]
        persona = str(meta.get("persona", "none"))
        system = " ".join(m["content"] for m in request.messages if m.get("role") == "system")
        profile = question_words(system) if persona != "none" else []
        n_items = int(meta.get("items", 25))
        pool = self.concepts(question)
        w = self.weights(question, persona, request.temperature)
        texts = []
        for i in range(request.n):
            rng = np.random.default_rng([derive_seed(request.seed, i), self.fields.signature])
            length = min(n_items, len(pool))
            keys = np.log(rng.random(len(pool))) / w  # Plackett-Luce via exponential race
            order = np.argsort(-keys)[:length]
            lines = []
            for rank, c in enumerate(order, start=1):
                u = rng.random()
                if u < self.fields.echo:
                    text = str(rng.choice(words)).capitalize()
                elif profile and u < self.fields.echo + self.fields.leak:
                    text = str(rng.choice(profile)).capitalize()
                else:
                    text = f"{rng.choice(_FILLERS)} {pool[int(c)]}".capitalize()
                lines.append(f"{rank}. {text}")
            texts.append("\n".join(lines))
        return texts
