"""Ground-truth QQ agents with known answers (seed 000, section 3 and appendix A).

Qubit agents (per item: a state and the "y" axes of questions A and B, as Bloch-sphere
angles ``[theta, phi]``; overridable through ``items``):

* :class:`ProjectiveAgent` (``projective``): Born rule + Lüders collapse onto the outcome
  eigenvector; ``q = 0`` exactly (Theorem 2) and ``a = b = c = d`` at every item.
* :class:`LudersSymmetricAgent` (``luders_symmetric``): unsharp Lüders instruments with one
  sharpness ``eta`` for both outcomes and both questions. ``q = 0`` exactly: the disagreement
  operator is ``(1 - eta^2 a.b) / 2 * I`` in both orders (the same holds with a different
  sharpness per question, as long as each question treats its two outcomes alike).
* :class:`LudersAsymmetricAgent` (``luders_asymmetric``): a sharpness per question and
  outcome (``eta_a_y, eta_a_n, eta_b_y, eta_b_n``); outcome asymmetry violates QQ generically.

Repetition agents (per item: ``u = p_A(y)``, ``v = p_B(y)``; overridable through ``items``):

* :class:`RepetitionAgent` (``repetition``): Proposition 4, one retention rate ``r``.
* :class:`MixtureRepetitionAgent` (``mixture_repetition``): Proposition 5,
  ``K_AB(b|a) = r_AB[a] 1[b=a] + (1 - r_AB[a]) p_B(b)`` and symmetrically for BA.

Agent fields and defaults: each agent's record (``projective``: :class:`QubitFields`,
``luders_symmetric``: :class:`LudersSymmetricFields`, ``luders_asymmetric``:
:class:`LudersAsymmetricFields`, ``repetition``: :class:`RepetitionFields`,
``mixture_repetition``: :class:`MixtureRepetitionFields`), each extending the common
:class:`~lmaudit.backends.sim.qq.core.QQFields`.

Per-item overrides (``items: {item_id: {...}}``): qubit agents take ``state``, ``axis_A``,
``axis_B`` as ``[theta, phi]``; repetition agents take ``u``, ``v``. Fields not overridden are
drawn; overrides that fix every field are taken as given (no ``marginal_range`` check).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

from lmaudit.backends.sim.fields import Unit, number
from lmaudit.backends.sim.qq.core import QF, QQFields, SimQQAgent
from lmaudit.backends.sim.qq.qubit import LuedersInstrument, bloch_vector, sequential_kernel
from lmaudit.backends.sim.qq.readout import SequentialKernel

# --------------------------------------------------------------------------- qubit agents


@dataclass(frozen=True, kw_only=True)
class QubitFields(QQFields):
    """The qubit agents' parameters (``projective``'s)."""

    purity: Unit = 1.0  # Bloch length of the state


@dataclass(frozen=True, kw_only=True)
class LudersSymmetricFields(QubitFields):
    eta: Unit = 0.7  # sharpness of every question and outcome


@dataclass(frozen=True, kw_only=True)
class LudersAsymmetricFields(QubitFields):
    """Sharpness per question and outcome."""

    eta_a_y: Unit = 0.9  # question A, outcome y
    eta_a_n: Unit = 0.5  # question A, outcome n
    eta_b_y: Unit = 0.9  # question B, outcome y
    eta_b_n: Unit = 0.5  # question B, outcome n


QB = TypeVar("QB", bound=QubitFields)


class _QubitAgent(SimQQAgent[QB]):
    item_keys: ClassVar[tuple[str, ...]] = ("state", "axis_A", "axis_B")

    def sharpness(self) -> tuple[float, float, float, float]:
        """``(eta_Ay, eta_An, eta_By, eta_Bn)``."""
        raise NotImplementedError

    def _check_override(self, field: str, value: Any) -> Any:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 2:
            raise ValueError(f"sim agent {self.name!r}: field {field!r} must be [theta, phi], got {value!r}")
        return [number(self.name, f"{field}[{i}]", x, -1e6, 1e6) for i, x in enumerate(value)]

    def _draw_item_params(self, rng: np.random.Generator) -> dict[str, Any]:
        x = rng.random(6)
        return {
            key: [float(np.arccos(1.0 - 2.0 * x[2 * j])), float(2.0 * np.pi * x[2 * j + 1])]
            for j, key in enumerate(self.item_keys)
        }

    def _build_kernel(self, params: Mapping[str, Any]) -> SequentialKernel:
        eta_ay, eta_an, eta_by, eta_bn = self.sharpness()
        s = bloch_vector(*params["state"])
        p = self.fields.purity
        r = (p * s[0], p * s[1], p * s[2])
        inst_a = LuedersInstrument(bloch_vector(*params["axis_A"]), eta_ay, eta_an)
        inst_b = LuedersInstrument(bloch_vector(*params["axis_B"]), eta_by, eta_bn)
        return sequential_kernel(r, inst_a, inst_b)


class ProjectiveAgent(_QubitAgent[QubitFields]):
    """Projective qubit measurements (sharpness 1): QQ holds exactly (Theorem 2)."""

    name: ClassVar[str] = "projective"

    def sharpness(self) -> tuple[float, float, float, float]:
        return (1.0, 1.0, 1.0, 1.0)


class LudersSymmetricAgent(_QubitAgent[LudersSymmetricFields]):
    """Unsharp Lüders instruments, one sharpness ``eta`` for every question and outcome."""

    name: ClassVar[str] = "luders_symmetric"

    def sharpness(self) -> tuple[float, float, float, float]:
        return (self.fields.eta,) * 4


class LudersAsymmetricAgent(_QubitAgent[LudersAsymmetricFields]):
    """Unsharp Lüders instruments with a sharpness per question and outcome
    (``eta_a_y``: question A, outcome y; ...)."""

    name: ClassVar[str] = "luders_asymmetric"

    def sharpness(self) -> tuple[float, float, float, float]:
        e = self.fields
        return (e.eta_a_y, e.eta_a_n, e.eta_b_y, e.eta_b_n)


# --------------------------------------------------------------------------- repetition agents


@dataclass(frozen=True, kw_only=True)
class RepetitionFields(QQFields):
    r: Unit = 0.5  # retention rate of every order and first answer


@dataclass(frozen=True, kw_only=True)
class MixtureRepetitionFields(QQFields):
    """Retention per order and first answer (``r_AB[.]``, ``r_BA[.]``)."""

    r_ab_y: Unit = 0.6  # order AB, first answer y
    r_ab_n: Unit = 0.2  # order AB, first answer n
    r_ba_y: Unit = 0.6  # order BA, first answer y
    r_ba_n: Unit = 0.2  # order BA, first answer n


class _RetentionAgent(SimQQAgent[QF]):
    item_keys: ClassVar[tuple[str, ...]] = ("u", "v")

    def retention(self) -> tuple[float, float, float, float]:
        """``(r_AB[y], r_AB[n], r_BA[y], r_BA[n])``."""
        raise NotImplementedError

    def _check_override(self, field: str, value: Any) -> Any:
        return number(self.name, field, value, 0.0, 1.0)

    def _draw_item_params(self, rng: np.random.Generator) -> dict[str, Any]:
        lo, hi = self.fields.marginal_range
        x = rng.random(2)
        return {"u": float(lo + (hi - lo) * x[0]), "v": float(lo + (hi - lo) * x[1])}

    def _build_kernel(self, params: Mapping[str, Any]) -> SequentialKernel:
        r_ab_y, r_ab_n, r_ba_y, r_ba_n = self.retention()
        u, v = float(params["u"]), float(params["v"])
        return SequentialKernel(
            u=u,
            v=v,
            k_ab_y=r_ab_y + (1.0 - r_ab_y) * v,
            k_ab_n=(1.0 - r_ab_n) * v,
            k_ba_y=r_ba_y + (1.0 - r_ba_y) * u,
            k_ba_n=(1.0 - r_ba_n) * u,
        )


class RepetitionAgent(_RetentionAgent[RepetitionFields]):
    """Proposition 4: symmetric repetition with one retention rate ``r``; QQ holds identically
    and ``OE_B = r (u - v)``."""

    name: ClassVar[str] = "repetition"

    def retention(self) -> tuple[float, float, float, float]:
        return (self.fields.r,) * 4


class MixtureRepetitionAgent(_RetentionAgent[MixtureRepetitionFields]):
    """Proposition 5: polarity- and position-dependent retention ``r_AB[.]``, ``r_BA[.]``
    (fields ``r_ab_y, r_ab_n, r_ba_y, r_ba_n``; the factory also accepts nested
    ``r_AB: {y, n}`` / ``r_BA: {y, n}``);
    ``q = u(1-v)(r_BA[n] - r_AB[y]) + (1-u)v(r_BA[y] - r_AB[n])`` (seed eq. 3)."""

    name: ClassVar[str] = "mixture_repetition"

    @classmethod
    def normalise_fields(cls, fields: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(fields)
        for nested, prefix in (("r_AB", "r_ab"), ("r_BA", "r_ba")):
            if nested not in out:
                continue
            value = out.pop(nested)
            if not isinstance(value, Mapping) or not set(value) <= {"y", "n"}:
                raise ValueError(
                    f"sim agent {cls.name!r}: field {nested!r} must be {{'y': r, 'n': r}}, got {value!r}"
                )
            for k, x in value.items():
                if f"{prefix}_{k}" in out:
                    raise ValueError(
                        f"sim agent {cls.name!r}: field {nested}.{k} given twice (also {prefix}_{k})"
                    )
                out[f"{prefix}_{k}"] = x
        return out

    def retention(self) -> tuple[float, float, float, float]:
        r = self.fields
        return (r.r_ab_y, r.r_ab_n, r.r_ba_y, r.r_ba_n)


QQ_AGENTS: dict[str, type[SimQQAgent]] = {
    cls.name: cls
    for cls in (
        ProjectiveAgent,
        RepetitionAgent,
        MixtureRepetitionAgent,
        LudersSymmetricAgent,
        LudersAsymmetricAgent,
    )
}
