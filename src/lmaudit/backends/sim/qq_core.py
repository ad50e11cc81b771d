"""Shared machinery of the QQ ``sim`` agents: meta parsing, label readout, sampling, identity.

Every QQ agent reduces, per item, to a :class:`SequentialKernel`: the two first-position
"yes" marginals ``u = p_A(y)``, ``v = p_B(y)`` and the four second-position "yes"
probabilities given the committed first answer. :class:`SimQQAgent` turns that kernel into
both backend contracts:

* ``label_logprobs``: semantic ``P(y)`` at the asked position -> labels via ``label_of``
  -> optional ``label_bias`` (a logit shift toward label ``"A"`` when the labels are A/B)
  -> ``probs = (1 - other_mass) * P``, ``other = other_mass`` (token ``"<other>"``).
* ``sample``: the same label distribution, tempered as ``p ** (1/T)`` renormalised over the
  two labels (``T = 0`` is greedy; ``other_mass`` is not tempered), then nucleus (``top_p``)
  truncation over {label_y, label_n, "<other>"}; draw ``i`` uses its own generator seeded by
  ``derive_seed(request.seed, i)``, so it does not depend on ``n``. ``max_tokens`` is ignored.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from lmaudit.backends.base import (
    BackendError,
    LabelRequest,
    LabelResult,
    SampleRequest,
    SampleResult,
    derive_seed,
)

SIM_QQ_VERSION = "qq-sim/1"
OTHER_TOKEN = "<other>"
_ORDERS = ("AB", "BA")
_QUESTIONS = ("A", "B")
_SEMANTIC = ("y", "n")
_MAX_DRAW_TRIES = 1_000


# --------------------------------------------------------------------------- validation


def check_float(agent: str, name: str, value: Any, lo: float, hi: float, *, hi_open: bool = False) -> float:
    """A finite number in ``[lo, hi]`` (``[lo, hi)`` if ``hi_open``), else ValueError naming the field."""
    interval = f"[{lo}, {hi})" if hi_open else f"[{lo}, {hi}]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"sim agent {agent!r}: field {name!r} must be a number in {interval}, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < lo or x > hi or (hi_open and x >= hi):
        raise ValueError(f"sim agent {agent!r}: field {name!r} must be in {interval}, got {value!r}")
    return x


def check_int(agent: str, name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < minimum:
        raise ValueError(f"sim agent {agent!r}: field {name!r} must be an integer >= {minimum}, got {value!r}")
    return int(value)


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
        raise BackendError("sim QQ agent: request has no QQ meta (needs item, order, position, question, "
                           "first_answer, label_of); the sim backend answers only from meta")
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


def item_generator(seed: int, item: str) -> np.random.Generator:
    """The per-item generator: seeded by sha256 of ``f"{seed}:{item}"``."""
    digest = hashlib.sha256(f"{seed}:{item}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


# --------------------------------------------------------------------------- base agent


class SimQQAgent:
    """Base of the QQ ground-truth agents (both :class:`LabelBackend` and :class:`SamplingBackend`).

    Subclasses set ``name`` and ``item_keys`` and implement :meth:`agent_params`,
    :meth:`_check_override`, :meth:`_draw_item_params` and :meth:`_build_kernel`.
    """

    reads_meta: bool = True
    name: ClassVar[str] = "base"
    version: ClassVar[str] = SIM_QQ_VERSION
    item_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        *,
        seed: int = 0,
        other_mass: float = 0.0,
        label_bias: float = 0.0,
        marginal_range: Sequence[float] = (0.1, 0.9),
        items: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        n = self.name
        self.seed = check_int(n, "seed", seed)
        self.other_mass = check_float(n, "other_mass", other_mass, 0.0, 1.0, hi_open=True)
        self.label_bias = check_float(n, "label_bias", label_bias, -50.0, 50.0)
        if isinstance(marginal_range, str | bytes) or not isinstance(marginal_range, Sequence) or len(
            marginal_range
        ) != 2:
            raise ValueError(f"sim agent {n!r}: field 'marginal_range' must be [lo, hi], got {marginal_range!r}")
        lo = check_float(n, "marginal_range[0]", marginal_range[0], 0.0, 1.0)
        hi = check_float(n, "marginal_range[1]", marginal_range[1], 0.0, 1.0)
        if not lo < hi:
            raise ValueError(f"sim agent {n!r}: field 'marginal_range' needs lo < hi, got {marginal_range!r}")
        self.marginal_range = (lo, hi)
        self.items = self._check_items(items or {})
        self._params_cache: dict[str, dict[str, Any]] = {}
        self._kernel_cache: dict[str, SequentialKernel] = {}

    # ---- subclass hooks
    def agent_params(self) -> dict[str, Any]:
        """The agent-specific parameters (JSON-able), as they enter :attr:`identity`."""
        return {}

    def _check_override(self, field: str, value: Any) -> Any:
        raise NotImplementedError

    def _draw_item_params(self, rng: np.random.Generator) -> dict[str, Any]:
        """One candidate draw of an item's parameters (the same number of draws every call)."""
        raise NotImplementedError

    def _build_kernel(self, params: Mapping[str, Any]) -> SequentialKernel:
        raise NotImplementedError

    # ---- parameters and kernels
    def _check_items(self, items: Any) -> dict[str, dict[str, Any]]:
        if not isinstance(items, Mapping):
            raise ValueError(f"sim agent {self.name!r}: field 'items' must map item id -> overrides")
        out: dict[str, dict[str, Any]] = {}
        for item, over in items.items():
            if not isinstance(over, Mapping):
                raise ValueError(f"sim agent {self.name!r}: field 'items[{item!r}]' must be a mapping")
            bad = sorted(set(over) - set(self.item_keys))
            if bad:
                raise ValueError(
                    f"sim agent {self.name!r}: field 'items[{item!r}]' has unknown key(s) {bad} "
                    f"(allowed: {list(self.item_keys)})"
                )
            out[str(item)] = {k: self._check_override(f"items[{item!r}].{k}", over[k]) for k in sorted(over)}
        return out

    def interior(self, *marginals: float) -> bool:
        lo, hi = self.marginal_range
        return all(lo <= m <= hi for m in marginals)

    def item_params(self, item: str) -> dict[str, Any]:
        """The item's parameters: drawn from ``(seed, item)`` with first-position marginals in
        ``marginal_range`` (rejection sampling), per-item overrides from ``items`` applied."""
        cached = self._params_cache.get(item)
        if cached is not None:
            return dict(cached)
        over = self.items.get(item, {})
        rng = item_generator(self.seed, item)
        for _ in range(_MAX_DRAW_TRIES):
            params = {**self._draw_item_params(rng), **over}
            if set(over) >= set(self.item_keys):
                break  # fully specified by the user: taken as given
            k = self._build_kernel(params)
            if self.interior(k.u, k.v):
                break
        else:
            raise BackendError(
                f"sim agent {self.name!r}, item {item!r}: no parameter draw put both first-position "
                f"marginals in marginal_range={list(self.marginal_range)} after {_MAX_DRAW_TRIES} tries"
            )
        self._params_cache[item] = params
        return dict(params)

    def kernel(self, item: str) -> SequentialKernel:
        k = self._kernel_cache.get(item)
        if k is None:
            k = self._build_kernel(self.item_params(item))
            self._kernel_cache[item] = k
        return k

    def semantic_p_yes(self, meta: Mapping[str, Any]) -> tuple[QQQuery, float]:
        query = parse_meta(meta)
        return query, self.kernel(query.item).p_yes(query.question, query.position, query.first_answer)

    # ---- identity
    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": "sim",
            "agent": self.name,
            "version": self.version,
            **self.agent_params(),
            "other_mass": self.other_mass,
            "label_bias": self.label_bias,
            "marginal_range": list(self.marginal_range),
            "items": self.items,
            "seed": self.seed,
        }

    # ---- LabelBackend
    def label_logprobs(self, requests: list[LabelRequest], top_k: int = 10) -> list[LabelResult]:
        return [self._label_one(r, top_k) for r in requests]

    def _label_one(self, request: LabelRequest, top_k: int) -> LabelResult:
        query, p_y = self.semantic_p_yes(request.meta)
        labels = tuple(request.labels)
        if len(labels) != 2 or set(labels) != set(query.label_of.values()):
            raise BackendError(
                f"sim agent {self.name!r}, item {query.item!r}: request labels {list(labels)} do not match "
                f"meta label_of {query.label_of}"
            )
        binary = biased_label_probs(p_y, query.label_of, self.label_bias)
        keep = 1.0 - self.other_mass
        probs = {label: keep * binary[label] for label in labels}
        entries = [*probs.items(), (OTHER_TOKEN, self.other_mass)]
        entries.sort(key=lambda e: (-e[1], e[0]))
        ranked = sorted(labels)
        return LabelResult(
            probs=probs,
            other=self.other_mass,
            top_k=entries[: max(top_k, 0)],
            label_token_ids={label: ranked.index(label) for label in labels},
        )

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        return {label: [label] for label in request.labels}

    # ---- SamplingBackend
    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        return [self._sample_one(r) for r in requests]

    def sampling_distribution(self, request: SampleRequest) -> tuple[list[str], list[float]]:
        """Outcomes ``[label_y, label_n, "<other>"]`` and the probabilities ``sample`` draws from."""
        query, p_y = self.semantic_p_yes(request.meta)
        where = f"sim agent {self.name!r}, item {query.item!r}"
        t, top_p = request.temperature, request.top_p
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
            raise BackendError(f"{where}: temperature must be a finite number >= 0, got {t!r}")
        if isinstance(top_p, bool) or not isinstance(top_p, int | float) or not 0.0 < top_p <= 1.0:
            raise BackendError(f"{where}: top_p must be in (0, 1], got {top_p!r}")
        ly, ln = query.label_of["y"], query.label_of["n"]
        binary = biased_label_probs(p_y, query.label_of, self.label_bias)
        tempered = temper([binary[ly], binary[ln]], float(t))
        keep = 1.0 - self.other_mass
        dist = nucleus([keep * tempered[0], keep * tempered[1], self.other_mass], float(top_p))
        return [ly, ln, OTHER_TOKEN], dist

    def _sample_one(self, request: SampleRequest) -> SampleResult:
        if isinstance(request.n, bool) or not isinstance(request.n, int) or request.n < 0:
            raise BackendError(f"sim agent {self.name!r}: n must be an integer >= 0, got {request.n!r}")
        outcomes, dist = self.sampling_distribution(request)
        cum = np.cumsum(dist)
        last = max(i for i, p in enumerate(dist) if p > 0.0)
        texts = []
        for i in range(request.n):
            x = np.random.default_rng(derive_seed(request.seed, i)).random()
            k = int(np.searchsorted(cum, x, side="right"))
            texts.append(outcomes[min(k, last)])
        return SampleResult(texts=texts)
