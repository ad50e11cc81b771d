"""The ``extractor`` sim agent: an LLM concept extractor with known output (sampling only).

It reads the raw answer from request ``meta["raw"]`` (as the choir study's extraction
requests carry it) and replies with the JSON object the extraction prompt asks for: every
line that starts ``<number>.``, ``<number>)`` or a bullet is one item, its text after the
marker; a ``[Justification: ...]`` on that line becomes the item's justification. With
probability ``invalid_rate`` per answer (drawn from ``(seed, answer)``, so the same answer
always gets the same reply) it replies with prose instead of JSON, which the study must
count as an invalid extraction. Temperature and draw index do not change the reply.

Fields (all enter :attr:`identity`): :class:`SimExtractorFields`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from lmaudit.backends.base import SampleRequest
from lmaudit.backends.sim.base import SimAgent
from lmaudit.backends.sim.fields import AgentFields, Unit, hashed_rng
from lmaudit.errors import BackendError

__all__ = ["SIM_EXTRACTOR_VERSION", "SimExtractor"]

SIM_EXTRACTOR_VERSION = "extractor-sim/1"
_ENTRY = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*•])\s+(.*\S)\s*$")
_JUST = re.compile(r"\s*\[\s*justification\s*:\s*(.*?)\]\s*", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class SimExtractorFields(AgentFields):
    """The ``extractor`` agent's parameters."""

    seed: int = 0  # which answers get prose
    invalid_rate: Unit = 0.0  # probability that an answer gets prose instead of JSON


class SimExtractor(SimAgent[SimExtractorFields]):
    """Sampling contract only (:class:`~lmaudit.backends.base.SamplingBackend`)."""

    name = "extractor"
    version = SIM_EXTRACTOR_VERSION

    def invalid(self, raw: str) -> bool:
        """Whether this agent answers ``raw`` with prose (deterministic in seed and answer)."""
        return bool(hashed_rng(self.fields.seed, raw).random() < self.fields.invalid_rate)

    @staticmethod
    def items(raw: str) -> list[dict[str, str | None]]:
        out: list[dict[str, str | None]] = []
        for line in raw.splitlines():
            m = _ENTRY.match(line)
            if m:
                just = _JUST.search(m.group(1))
                text = _JUST.sub(" ", m.group(1)).strip()
                out.append({"text": text, "justification": just.group(1).strip() if just else None})
        return out

    def draws(self, request: SampleRequest) -> list[str]:
        raw = request.meta.get("raw")
        if not isinstance(raw, str):
            raise BackendError("sim agent 'extractor': a request needs the raw answer in meta['raw']")
        if self.invalid(raw):
            reply = "Sure! The answer lists several ideas; the main one is the first."
        else:
            reply = json.dumps({"items": self.items(raw)}, ensure_ascii=False)
        return [reply] * request.n
