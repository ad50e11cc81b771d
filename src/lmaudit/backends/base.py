"""The two backend contracts every model implementation honours.

* **Label log-probabilities** (:class:`LabelBackend`): for a batch of chat prompts and a set
  of canonical labels, the next-token probability of each label, the remaining ("other")
  mass and the top-k tokens.
* **Sampling** (:class:`SamplingBackend`): for a batch of chat prompts, ``n`` sampled
  completions with temperature, max tokens and a seed.

A backend identifies itself by :attr:`identity`, a JSON-able dict of everything that
changes its outputs; :func:`identity_digest` turns it into the digest that prefixes every
cache key, so a cache never serves one model's answers as another's.

Requests may carry ``meta``: protocol context (item id, order, position, committed first
answer, label-to-semantic map). Real models never read it; the ``sim`` agents answer from
it. It is part of the cache key only for backends that declare ``reads_meta = True``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from lmaudit.provenance.digest import canonical_json, sha256_text

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}


def identity_digest(identity: dict[str, Any]) -> str:
    return sha256_text(canonical_json(identity))


@dataclass(frozen=True)
class LabelRequest:
    """One chat prompt whose next token is read out over ``labels``."""

    messages: tuple[Message, ...]
    labels: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def payload(self, include_meta: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "labels", "messages": list(self.messages), "labels": list(self.labels)}
        if include_meta:
            out["meta"] = self.meta
        return out


@dataclass(frozen=True)
class LabelResult:
    """Next-token readout at the answer position.

    ``probs[label]`` is the full-vocabulary next-token probability of the label's single
    token; ``other = 1 - sum(probs)``; ``top_k`` lists ``(token_text, probability)`` pairs,
    most probable first. ``label_token_ids`` records the token id each label scored.
    """

    probs: dict[str, float]
    other: float
    top_k: list[tuple[str, float]]
    label_token_ids: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "probs": self.probs,
            "other": self.other,
            "top_k": [[t, p] for t, p in self.top_k],
            "label_token_ids": self.label_token_ids,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LabelResult:
        return cls(
            probs={k: float(v) for k, v in d["probs"].items()},
            other=float(d["other"]),
            top_k=[(str(t), float(p)) for t, p in d["top_k"]],
            label_token_ids={k: int(v) for k, v in d.get("label_token_ids", {}).items()},
        )


@dataclass(frozen=True)
class SampleRequest:
    """One chat prompt to draw ``n`` completions from."""

    messages: tuple[Message, ...]
    n: int
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 1
    seed: int = 0
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def payload(self, include_meta: bool, draw_index: int) -> dict[str, Any]:
        """Cache payload of one draw: the request without ``n``, plus seed and draw index."""
        out: dict[str, Any] = {
            "kind": "sample",
            "messages": list(self.messages),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "draw": draw_index,
        }
        if include_meta:
            out["meta"] = self.meta
        return out


@dataclass(frozen=True)
class SampleResult:
    """``n`` completions, in draw order (draw ``i`` used seed ``derive_seed(seed, i)``).

    ``refusals[i]`` is why draw ``i`` has no answer (the server's refusal or finish reason, e.g.
    ``content_filter``), ``None`` for an answer; empty when every draw is an answer. A refused
    draw's text is ``""``: it is never cached, and a study records it as a refusal."""

    texts: list[str]
    refusals: tuple[str | None, ...] = ()

    def refusal(self, draw: int) -> str | None:
        return self.refusals[draw] if self.refusals else None

    @property
    def refused(self) -> bool:
        return any(r is not None for r in self.refusals)


@dataclass(frozen=True)
class Refused:
    """A draw the server answered without an answer (a refusal, a filtered answer): ``reason``
    is its finish reason, with the refusal's words where the server gave them."""

    reason: str


def derive_seed(seed: int, draw_index: int) -> int:
    """The per-draw seed: stable across processes and platforms (63-bit)."""
    h = hashlib.sha256(f"{seed}:{draw_index}".encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


@runtime_checkable
class Backend(Protocol):
    """What every backend exposes."""

    reads_meta: bool

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes outputs: backend kind+version, model id, revision, dtype,
        chat-template hash, label token ids (where fixed)..."""
        ...


@runtime_checkable
class LabelBackend(Backend, Protocol):
    def label_logprobs(self, requests: list[LabelRequest], top_k: int = 10) -> list[LabelResult]: ...

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        """Gate G1: for each label, the token pieces it renders to *in the rendered context*
        (after the assistant-turn prefix). A label passes when its list has length 1."""
        ...


@runtime_checkable
class SamplingBackend(Backend, Protocol):
    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]: ...
