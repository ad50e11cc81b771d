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

Fields (all enter :attr:`identity`): ``signature`` (int, default 0), ``signature_strength``
(1.5), ``persona_strength`` (1.5), ``persona_share`` (0.2), ``echo`` (0.0), ``leak`` (0.0), ``zipf`` (1.0),
``widths`` (question -> pool size), ``seed`` (0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lmaudit.backends.base import SampleRequest, derive_seed
from lmaudit.backends.sim.base import SimAgent
from lmaudit.backends.sim.fields import hashed_rng
from lmaudit.errors import BackendError
from lmaudit.text import question_words

__all__ = ["SIM_FREELIST_VERSION", "FreeListSampler"]

SIM_FREELIST_VERSION = "freelist-sim/1"
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bu", "da", "fe", "gi", "ho", "ju", "pe")
_FILLERS = ("the", "a", "key", "core", "main")


class FreeListSampler(SimAgent):
    """Sampling contract only; reads ``meta`` (question, question_text, persona, items)."""

    name = "freelist"
    version = SIM_FREELIST_VERSION

    def __init__(
        self,
        *,
        seed: int = 0,
        signature: int = 0,
        signature_strength: float = 1.5,
        persona_strength: float = 1.5,
        persona_share: float = 0.2,
        echo: float = 0.0,
        leak: float = 0.0,
        zipf: float = 1.0,
        widths: Mapping[str, int] | None = None,
    ) -> None:
        self.seed, self.signature = self._count("seed", seed), self._count("signature", signature)
        self.signature_strength = self._number("signature_strength", signature_strength, 0.0)
        self.persona_strength = self._number("persona_strength", persona_strength, 0.0)
        self.persona_share = self._number("persona_share", persona_share, 0.0, 1.0)
        self.echo = self._number("echo", echo, 0.0, 1.0)
        self.leak = self._number("leak", leak, 0.0, 1.0)
        self.zipf = self._number("zipf", zipf, 0.0)
        self.widths = {str(k): int(v) for k, v in (widths or {}).items()}
        if any(v < 2 for v in self.widths.values()):
            raise ValueError(f"sim agent 'freelist': field 'widths' needs pool sizes >= 2, got {self.widths}")

    def params(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "signature": self.signature,
            "signature_strength": self.signature_strength,
            "persona_strength": self.persona_strength,
            "persona_share": self.persona_share,
            "echo": self.echo,
            "leak": self.leak,
            "zipf": self.zipf,
            "widths": dict(sorted(self.widths.items())),
        }

    def width(self, question: str) -> int:
        if question in self.widths:
            return self.widths[question]
        return int(hashed_rng(self.seed, "width", question).integers(8, 61))

    def concepts(self, question: str) -> list[str]:
        """The question's concept pool (the same for every signature)."""
        rng = hashed_rng(self.seed, "concepts", question)
        out = []
        for _ in range(self.width(question)):
            words = ["".join(rng.choice(_SYLLABLES, size=3)) for _ in range(3)]
            out.append(" ".join(words))
        return out

    def weights(self, question: str, persona: str, temperature: float) -> np.ndarray:
        k = self.width(question)
        base = 1.0 / np.arange(1, k + 1) ** self.zipf
        z = hashed_rng(self.seed, "signature", self.signature, question).standard_normal(k)
        logw = np.log(base) + self.signature_strength * z
        if persona and persona != "none":
            boosted = hashed_rng(self.seed, "persona", persona, question).random(k) < self.persona_share
            logw = logw + self.persona_strength * boosted
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
            rng = np.random.default_rng([derive_seed(request.seed, i), self.signature])
            length = min(n_items, len(pool))
            keys = np.log(rng.random(len(pool))) / w  # Plackett-Luce via exponential race
            order = np.argsort(-keys)[:length]
            lines = []
            for rank, c in enumerate(order, start=1):
                u = rng.random()
                if u < self.echo:
                    text = str(rng.choice(words)).capitalize()
                elif profile and u < self.echo + self.leak:
                    text = str(rng.choice(profile)).capitalize()
                else:
                    text = f"{rng.choice(_FILLERS)} {pool[int(c)]}".capitalize()
                lines.append(f"{rank}. {text}")
            texts.append("\n".join(lines))
        return texts
