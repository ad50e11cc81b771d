"""Building blocks of the QQ ``sim`` agents: the per-item
:class:`SequentialKernel`, request-``meta`` parsing and the label read-out helpers
(label bias, temperature, nucleus truncation)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lmaudit.errors import BackendError

SIM_QQ_VERSION = "qq-sim/1"
OTHER_TOKEN = "<other>"
_ORDERS = ("AB", "BA")
_QUESTIONS = ("A", "B")
_SEMANTIC = ("y", "n")
MAX_DRAW_TRIES = 1_000


# --------------------------------------------------------------------------- kernel


@dataclass(frozen=True)
class SequentialKernel:
    """One item's sequential behaviour in semantic coordinates.

    ``k_ab[alpha] = K_AB(y | alpha)`` (question B asked second, A answered ``alpha`` first);
    ``k_ba[beta] = K_BA(y | beta)`` (question A asked second, B answered ``beta`` first).
    """

    u: float  # p_A(y) at position 1
    v: float  # p_B(y) at position 1
    k_ab_y: float
    k_ab_n: float
    k_ba_y: float
    k_ba_n: float

    def p_yes(self, question: str, position: int, first_answer: str | None) -> float:
        if position == 1:
            return self.u if question == "A" else self.v
        if question == "B":  # order AB: A answered first
            return self.k_ab_y if first_answer == "y" else self.k_ab_n
        return self.k_ba_y if first_answer == "y" else self.k_ba_n


@dataclass(frozen=True)
class QQQuery:
    """The parts of a request's ``meta`` a QQ agent needs."""

    item: str
    order: str
    position: int
    question: str
    first_answer: str | None
    label_of: dict[str, str]


def parse_meta(meta: Any) -> QQQuery:
    """Validate a QQ request ``meta`` (see ``lmaudit.studies.qq.records.request_meta``)."""
    if not isinstance(meta, Mapping) or not meta:
        raise BackendError(
            "sim QQ agent: request has no QQ meta (needs item, order, position, question, "
            "first_answer, label_of); the sim backend answers only from meta"
        )
    item = meta.get("item", "?")
    where = f"sim QQ agent, item {item!r}"
    missing = [k for k in ("item", "order", "position", "question", "label_of") if k not in meta]
    if missing:
        raise BackendError(f"{where}: request meta lacks {', '.join(repr(k) for k in missing)}")
    if meta.get("study", "qq") != "qq":
        raise BackendError(f"{where}: meta study {meta['study']!r} is not 'qq'")
    if not isinstance(item, str) or not item:
        raise BackendError(f"{where}: meta 'item' must be a non-empty string")
    order, position, question = meta["order"], meta["position"], meta["question"]
    if order not in _ORDERS:
        raise BackendError(f"{where}: meta 'order' must be 'AB' or 'BA', got {order!r}")
    if isinstance(position, bool) or position not in (1, 2):
        raise BackendError(f"{where}: meta 'position' must be 1 or 2, got {position!r}")
    if question not in _QUESTIONS or question != order[position - 1]:
        raise BackendError(
            f"{where}: meta 'question' {question!r} is not the question asked at position {position} "
            f"of order {order!r} (expected {order[position - 1]!r})"
        )
    first_answer = meta.get("first_answer")
    if position == 1 and first_answer is not None:
        raise BackendError(f"{where}: meta 'first_answer' must be None at position 1, got {first_answer!r}")
    if position == 2 and first_answer not in _SEMANTIC:
        raise BackendError(
            f"{where}: meta 'first_answer' must be 'y' or 'n' at position 2, got {first_answer!r}"
        )
    label_of = meta["label_of"]
    if (
        not isinstance(label_of, Mapping)
        or set(label_of) != set(_SEMANTIC)
        or not all(isinstance(x, str) and x for x in label_of.values())
        or label_of["y"] == label_of["n"]
    ):
        raise BackendError(
            f"{where}: meta 'label_of' must map 'y' and 'n' to two distinct labels, got {label_of!r}"
        )
    return QQQuery(item, order, int(position), question, first_answer, dict(label_of))


# --------------------------------------------------------------------------- readout helpers


def biased_label_probs(p_y: float, label_of: Mapping[str, str], label_bias: float) -> dict[str, float]:
    """Binary label distribution; with labels A/B, ``label_bias`` is added to the logit of "A"."""
    probs = {label_of["y"]: p_y, label_of["n"]: 1.0 - p_y}
    if label_bias != 0.0 and set(probs) == {"A", "B"}:
        w = math.exp(label_bias)
        pa = probs["A"]
        pa_new = pa * w / (pa * w + (1.0 - pa))
        probs = {"A": pa_new, "B": 1.0 - pa_new}
    return probs


def temper(p: Sequence[float], temperature: float) -> list[float]:
    """``p ** (1/T)`` renormalised (log-space); ``T = 0`` is greedy (an exact tie splits evenly)."""
    if temperature == 0.0:
        best = max(p)
        winners = [1.0 if x == best else 0.0 for x in p]
        return [w / sum(winners) for w in winners]
    logs = [math.log(x) if x > 0.0 else -math.inf for x in p]
    top = max(logs)
    w = [math.exp((lg - top) / temperature) if lg > -math.inf else 0.0 for lg in logs]
    return [x / sum(w) for x in w]


def nucleus(p: Sequence[float], top_p: float) -> list[float]:
    """Keep the most probable outcomes until their mass reaches ``top_p``; renormalise."""
    if top_p >= 1.0:
        return list(p)
    order = sorted(range(len(p)), key=lambda i: (-p[i], i))
    keep: set[int] = set()
    mass = 0.0
    for i in order:
        keep.add(i)
        mass += p[i]
        if mass >= top_p:
            break
    return [p[i] / mass if i in keep else 0.0 for i in range(len(p))]
