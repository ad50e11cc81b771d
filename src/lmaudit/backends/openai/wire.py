"""The OpenAI-compatible wire format: chat-template rendering as transformers does it,
top-logprob parsing for both response shapes, label readout, the error-message and
``Retry-After`` helpers, and the tokenize-endpoint dialects (over a POST function given by
:mod:`lmaudit.backends.openai.backend`)."""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmaudit.backends.base import LabelResult, Message
from lmaudit.backends.chat_template import render_chat_template as _render
from lmaudit.errors import BackendError
from lmaudit.provenance.jsoncheck import bounded_loads


@dataclass(frozen=True)
class LabelResultWithVariants(LabelResult):
    """A :class:`LabelResult` that also records which token texts were read for each label."""

    matched_variants: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "matched_variants": self.matched_variants}


def render_chat_template(template: str, messages: Sequence[Message], bos_token: str = "") -> str:
    """Render ``messages`` with a HF-style Jinja chat template, as transformers does."""
    return _render(template, messages, add_generation_prompt=True, bos_token=bos_token)


# --- response parsing (pure) -----------------------------------------------------------------


def first_position_top(choice: Mapping[str, Any]) -> list[tuple[str, float, int]]:
    """``(token_text, logprob, token_id or -1)`` alternatives at the first generated position,
    most probable first. Reads the chat shape (``logprobs.content[0].top_logprobs``) and the
    legacy completions shape (``logprobs.top_logprobs[0]`` as a ``{token: logprob}`` dict)."""
    lp = choice.get("logprobs")
    if not isinstance(lp, Mapping):
        raise BackendError(
            "openai backend: the server returned no logprobs (for llama-cpp-python start "
            "the server with --logits_all true; hosted APIs may not offer them)"
        )
    entries: list[tuple[str, float, int]] = []
    content = lp.get("content")
    if isinstance(content, list) and content:
        first = content[0]
        tops = first.get("top_logprobs") or [first]
        for t in tops:
            if not isinstance(t, Mapping):
                raise BackendError(f"openai backend: unexpected top_logprobs entry {str(t)[:200]}")
            tid = t.get("id", t.get("token_id", -1))
            entries.append(
                (
                    str(t.get("token", "")),
                    _logprob(t.get("logprob"), str(t.get("token", ""))),
                    int(tid) if tid is not None else -1,
                )
            )
    elif isinstance(lp.get("top_logprobs"), list) and lp["top_logprobs"]:
        first_top = lp["top_logprobs"][0]
        if not isinstance(first_top, Mapping):
            raise BackendError(f"openai backend: unexpected top_logprobs shape {str(first_top)[:200]}")
        entries = [(str(tok), _logprob(v, str(tok)), -1) for tok, v in first_top.items()]
    else:
        raise BackendError(
            f"openai backend: no logprobs at the first position (finish_reason="
            f"{choice.get('finish_reason')!r}; a server may drop them when the first token ends the turn): "
            f"{str(lp)[:200]}"
        )
    entries.sort(key=lambda e: -e[1])
    return _checked_mass(entries)


def read_labels(
    entries: list[tuple[str, float, int]], labels: Sequence[str], top_k: int, space_variants: bool = False
) -> LabelResult:
    """Label probabilities from top-logprob entries (absent labels: 0.0, mass left in ``other``)."""
    probs: dict[str, float] = {}
    ids: dict[str, int] = {}
    matched: dict[str, list[str]] = {}
    for label in labels:
        variants = [label, " " + label] if space_variants else [label]
        p, tid, hit = 0.0, -1, []
        for v in variants:
            hit_entry = next((e for e in entries if e[0] == v), None)  # sorted: the likeliest
            if hit_entry is not None:
                p += math.exp(hit_entry[1])
                tid = hit_entry[2] if tid == -1 else tid
                hit.append(v)
        probs[label], ids[label], matched[label] = p, tid, hit
    other = min(1.0, max(0.0, 1.0 - sum(probs.values())))
    top = [(t, math.exp(lp)) for t, lp, _ in entries[: max(0, top_k)]]
    if space_variants:
        return LabelResultWithVariants(probs, other, top, ids, matched_variants=matched)
    return LabelResult(probs=probs, other=other, top_k=top, label_token_ids=ids)


#: How far above 0 a log-probability, and above 1 the top alternatives' summed probability, may
#: come back and still be read as rounding (servers compute in float32); anything more is not a
#: distribution, and the answer is refused before it can be cached.
LOGPROB_ROUNDING = 1e-4


def _logprob(x: Any, token: str) -> float:
    """A log-probability as the server sent it: a number at most 0 (up to rounding, read as 0),
    ``-inf``, or ``null`` (p = 0: JSON has no infinity, and llama.cpp writes ``-inf`` as ``null``).
    Anything else is refused with the value the server sent."""
    if x is None:
        return -math.inf
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise BackendError(
            f"openai backend: the server sent {x!r} as the logprob of token {token!r}, not a number; "
            "the answer is refused and not cached"
        )
    v = float(x)
    if math.isnan(v) or v > LOGPROB_ROUNDING:
        raise BackendError(
            f"openai backend: the server sent logprob {v!r} for token {token!r}, not a log-probability "
            f"(p = exp({v!r}) is not in [0, 1]); the answer is refused and not cached"
        )
    return min(v, 0.0)


def _checked_mass(entries: list[tuple[str, float, int]]) -> list[tuple[str, float, int]]:
    mass = math.fsum(math.exp(lp) for _, lp, _ in entries)
    if mass > 1 + LOGPROB_ROUNDING:
        raise BackendError(
            f"openai backend: the server's top alternatives have probabilities summing to {mass:.6g} > 1 "
            f"({', '.join(f'{t!r}: {math.exp(lp):.4g}' for t, lp, _ in entries[:5])}); "
            "the answer is refused and not cached"
        )
    return entries


def server_message(text: str, reason: str = "") -> str:
    """What an error answer's body (``text``) says, for a message: the ``error`` / ``detail`` /
    ``message`` field of a JSON body, else the text itself, else the HTTP reason phrase."""
    try:
        body = bounded_loads(text)
    except ValueError:
        return text[:500] or reason or ""
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return (err if isinstance(err, str) else json.dumps(err))[:500]
    return json.dumps(body)[:500]


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); None if absent."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


# --- tokenize endpoints (gate G1), over a given POST -------------------------------------------


def tokenize_via(
    post: Callable[[str, dict[str, Any]], Any], root: str, model: str, dialect: str, text: str
) -> tuple[list[int], list[str] | None]:
    """Token ids of ``text`` and, where the server gives them, their pieces."""
    if dialect == "llama-cpp-python":
        out = post(f"{root}/extras/tokenize", {"model": model, "input": text})
    elif dialect == "llama.cpp":
        out = post(f"{root}/tokenize", {"content": text, "with_pieces": True})
    else:
        out = post(f"{root}/tokenize", {"model": model, "prompt": text, "return_token_strs": True})
    toks = out.get("tokens") if isinstance(out, dict) else None
    if not isinstance(toks, list):
        raise BackendError(f"tokenize ({dialect}): unexpected response {str(out)[:200]}")
    if toks and isinstance(toks[0], dict):  # llama.cpp with_pieces
        return [int(t["id"]) for t in toks], [str(t.get("piece", "")) for t in toks]
    strs = out.get("token_strs")
    return [int(t) for t in toks], [str(s) for s in strs] if isinstance(strs, list) else None


def detokenize_via(
    post: Callable[[str, dict[str, Any]], Any], root: str, model: str, dialect: str, token_id: int
) -> str:
    if dialect == "llama-cpp-python":
        return str(post(f"{root}/extras/detokenize", {"model": model, "tokens": [token_id]}).get("text", ""))
    if dialect == "vllm":
        return str(post(f"{root}/detokenize", {"model": model, "tokens": [token_id]}).get("prompt", ""))
    return str(post(f"{root}/detokenize", {"tokens": [token_id]}).get("content", ""))
