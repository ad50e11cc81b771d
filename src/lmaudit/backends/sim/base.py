"""What every ``sim`` agent shares: it reads request ``meta``, names itself and its version in
:attr:`~SimAgent.identity` beside its own fields, checks its fields with errors that name the
agent, and answers the sampling contract one request at a time (``n`` checked here)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from lmaudit.backends.base import SampleRequest, SampleResult
from lmaudit.backends.sim.fields import count, number
from lmaudit.errors import BackendError

__all__ = ["SimAgent"]


class SimAgent:
    """Base of the sim agents. Subclasses set ``name`` and ``version`` and implement
    :meth:`params` (their fields, as they enter :attr:`identity`) and :meth:`draws`."""

    reads_meta: bool = True
    name: ClassVar[str] = "base"
    version: ClassVar[str] = ""

    @classmethod
    def normalise_fields(cls, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Config fields -> constructor keywords (hook for accepted alternative spellings)."""
        return dict(fields)

    def params(self) -> dict[str, Any]:
        """The agent's own fields (JSON-able), as they enter :attr:`identity`."""
        raise NotImplementedError

    @property
    def identity(self) -> dict[str, Any]:
        return {"backend": "sim", "agent": self.name, "version": self.version, **self.params()}

    def _number(
        self, field: str, value: Any, lo: float = -math.inf, hi: float = math.inf, *, hi_open: bool = False
    ) -> float:
        return number(self.name, field, value, lo, hi, hi_open=hi_open)

    def _count(self, field: str, value: Any, minimum: int = 0) -> int:
        return count(self.name, field, value, minimum)

    # ---- SamplingBackend
    def sample(self, requests: list[SampleRequest]) -> list[SampleResult]:
        out = []
        for r in requests:
            if isinstance(r.n, bool) or not isinstance(r.n, int) or r.n < 0:
                raise BackendError(f"sim agent {self.name!r}: n must be an integer >= 0, got {r.n!r}")
            out.append(SampleResult(texts=self.draws(r)))
        return out

    def draws(self, request: SampleRequest) -> list[str]:
        """The request's ``n`` completions, draw ``i`` from ``derive_seed(request.seed, i)``."""
        raise NotImplementedError
