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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, TypeVar

import numpy as np

from lmaudit.backends.base import LabelRequest, LabelResult, SampleRequest, derive_seed
from lmaudit.backends.sim.base import SimAgent
from lmaudit.backends.sim.fields import AgentFields, Bounds, Check, hashed_rng, number
from lmaudit.backends.sim.qq.readout import (
    MAX_DRAW_TRIES,
    OTHER_TOKEN,
    SIM_QQ_VERSION,
    QQQuery,
    SequentialKernel,
    biased_label_probs,
    nucleus,
    parse_meta,
    temper,
)
from lmaudit.errors import BackendError


def _marginal_range(agent: SimAgent, name: str, value: Any, earlier: Any) -> list[float]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"sim agent {agent.name!r}: field {name!r} must be [lo, hi], got {value!r}")
    lo, hi = (number(agent.name, f"{name}[{i}]", value[i], 0.0, 1.0) for i in (0, 1))
    if not lo < hi:
        raise ValueError(f"sim agent {agent.name!r}: field {name!r} needs lo < hi, got {value!r}")
    return [lo, hi]


def _items(agent: SimAgent, name: str, value: Any, earlier: Any) -> dict[str, dict[str, Any]]:
    assert isinstance(agent, SimQQAgent)
    return agent.check_items(value or {})


@dataclass(frozen=True, kw_only=True)
class QQFields(AgentFields):
    """The fields every QQ agent has (after its own in the identity)."""

    other_mass: Annotated[float, Bounds(0.0, 1.0, hi_open=True)] = 0.0  # mass of the token "<other>"
    label_bias: Annotated[float, Bounds(-50.0, 50.0)] = 0.0  # logit shift toward label "A" (labels A/B)
    # [lo, hi]: per-item draws keep both first-position marginals inside it
    marginal_range: Annotated[list[float], Check(_marginal_range)] = field(default_factory=lambda: [0.1, 0.9])
    # item id -> overrides of the agent's ``item_keys``
    items: Annotated[dict[str, dict[str, Any]], Check(_items)] = field(default_factory=dict)
    seed: int = 0  # per-item parameter draws


QF = TypeVar("QF", bound=QQFields)


class SimQQAgent(SimAgent[QF]):
    """Base of the QQ ground-truth agents (both :class:`LabelBackend` and :class:`SamplingBackend`).

    Subclasses set ``name`` and ``item_keys``, name their record (extending :class:`QQFields`)
    as the type argument and implement :meth:`_check_override`, :meth:`_draw_item_params` and :meth:`_build_kernel`.
    """

    version = SIM_QQ_VERSION
    item_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **given: Any) -> None:
        super().__init__(**given)
        self._params_cache: dict[str, dict[str, Any]] = {}
        self._kernel_cache: dict[str, SequentialKernel] = {}

    # ---- subclass hooks
    def _check_override(self, field: str, value: Any) -> Any:
        raise NotImplementedError

    def _draw_item_params(self, rng: np.random.Generator) -> dict[str, Any]:
        """One candidate draw of an item's parameters (the same number of draws every call)."""
        raise NotImplementedError

    def _build_kernel(self, params: Mapping[str, Any]) -> SequentialKernel:
        raise NotImplementedError

    # ---- parameters and kernels
    def check_items(self, items: Any) -> dict[str, dict[str, Any]]:
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
        lo, hi = self.fields.marginal_range
        return all(lo <= m <= hi for m in marginals)

    def item_params(self, item: str) -> dict[str, Any]:
        """The item's parameters: drawn from ``(seed, item)`` with first-position marginals in
        ``marginal_range`` (rejection sampling), per-item overrides from ``items`` applied."""
        cached = self._params_cache.get(item)
        if cached is not None:
            return dict(cached)
        over = self.fields.items.get(item, {})
        rng = hashed_rng(self.fields.seed, item)
        for _ in range(MAX_DRAW_TRIES):
            params = {**self._draw_item_params(rng), **over}
            if set(over) >= set(self.item_keys):
                break  # fully specified by the user: taken as given
            k = self._build_kernel(params)
            if self.interior(k.u, k.v):
                break
        else:
            raise BackendError(
                f"sim agent {self.name!r}, item {item!r}: no parameter draw put both first-position "
                f"marginals in marginal_range={list(self.fields.marginal_range)} after {MAX_DRAW_TRIES} tries"
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
        binary = biased_label_probs(p_y, query.label_of, self.fields.label_bias)
        keep = 1.0 - self.fields.other_mass
        probs = {label: keep * binary[label] for label in labels}
        entries = [*probs.items(), (OTHER_TOKEN, self.fields.other_mass)]
        entries.sort(key=lambda e: (-e[1], e[0]))
        ranked = sorted(labels)
        return LabelResult(
            probs=probs,
            other=self.fields.other_mass,
            top_k=entries[: max(top_k, 0)],
            label_token_ids={label: ranked.index(label) for label in labels},
        )

    def check_single_token(self, request: LabelRequest) -> dict[str, list[str]]:
        return {label: [label] for label in request.labels}

    # ---- SamplingBackend
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
        binary = biased_label_probs(p_y, query.label_of, self.fields.label_bias)
        tempered = temper([binary[ly], binary[ln]], float(t))
        keep = 1.0 - self.fields.other_mass
        dist = nucleus([keep * tempered[0], keep * tempered[1], self.fields.other_mass], float(top_p))
        return [ly, ln, OTHER_TOKEN], dist

    def draws(self, request: SampleRequest) -> list[str]:
        outcomes, dist = self.sampling_distribution(request)
        cum = np.cumsum(dist)
        last = max(i for i, p in enumerate(dist) if p > 0.0)
        texts = []
        for i in range(request.n):
            x = np.random.default_rng(derive_seed(request.seed, i)).random()
            k = int(np.searchsorted(cum, x, side="right"))
            texts.append(outcomes[min(k, last)])
        return texts
