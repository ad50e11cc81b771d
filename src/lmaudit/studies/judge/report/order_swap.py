"""The ``order_swap`` and ``length`` sections' views: MLflow metrics, the summary line, figure
data for ``dvc plots`` and the rows of the report's position tables (one per group of pairs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lmaudit.studies.judge.order_swap import COUNT_KEYS
from lmaudit.text import metric_safe, metrics_under

if TYPE_CHECKING:
    from lmaudit.studies.judge.import_sections import (
        Flipped,
        LengthSection,
        OrderSwap,
        PairBlock,
        PerVerdict,
        Randomized,
    )

__all__ = ["TableRow", "length_metrics", "length_summary", "metrics", "plot_rows", "summary", "table"]


def _block_metrics(b: PairBlock, prefix: str, full: bool) -> dict[str, float]:
    out: dict[str, float] = {}
    names = COUNT_KEYS if full else ("n", "first_both", "second_both")
    for k in names:
        out[f"{prefix}.{k}"] = getattr(b.counts, k)
    readings: tuple[tuple[Flipped | PerVerdict, str], ...] = (
        (b.flipped, "flipped_first"),
        (b.per_verdict, "first"),
    )
    for r, short in readings:
        values = {"rate": r.rate, "ci_low": r.ci.low, "ci_high": r.ci.high, "p": r.p}
        out |= metrics_under(prefix, **{f"{short}_{name}": v for name, v in values.items()})
    return out


def _shi_metrics(b: PairBlock, prefix: str) -> dict[str, float]:
    pc, pf = b.position_consistency, b.preference_fairness
    return metrics_under(
        prefix,
        position_consistency_ci_low=pc.ci.low,
        position_consistency_ci_high=pc.ci.high,
        primacy=pf.primacy,
        recency=pf.recency,
        position_consistency=pc.rate,
        preference_fairness=pf.value,
    )


def _randomized_metrics(r: Randomized) -> dict[str, float]:
    prefix = "order_swap.randomized"
    counts = metrics_under(prefix, verdicts=r.verdicts, decisive=r.decisive, first_wins=r.first_wins)
    return counts | r.metrics(prefix, rate="first_rate")


def metrics(section: OrderSwap) -> dict[str, float]:
    """``order_swap.<count>``, ``order_swap.{flipped_first,first}_{rate,ci_low,ci_high,p}``,
    ``order_swap.{position_consistency,preference_fairness,primacy,recency}`` overall; per group
    ``order_swap.<group>.<name>.`` with n, first_both, second_both, the rates, position
    consistency and preference fairness; ``order_swap.randomized.*`` and
    ``order_swap.win_rate.<model>.{balanced,order_1,order_2}`` where present."""
    out = _block_metrics(section, "order_swap", full=True)
    out.update(_shi_metrics(section, "order_swap"))
    for short, _, blocks in section.groups():
        for name, b in blocks.items():
            prefix = f"order_swap.{short}.{metric_safe(name)}"
            out.update(_block_metrics(b, prefix, full=False))
            out.update(_shi_metrics(b, prefix))
    if section.randomized is not None:
        out.update(_randomized_metrics(section.randomized))
    if section.win_rates is not None:
        for model, w in section.win_rates.models.items():
            out |= metrics_under(
                f"order_swap.win_rate.{metric_safe(model)}",
                balanced=w.balanced,
                order_1=w.order_1,
                order_2=w.order_2,
            )
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def summary(section: OrderSwap) -> str:
    c, f, v = section.counts, section.flipped, section.per_verdict
    parts = []
    if c.n:
        pc, pf = section.position_consistency, section.preference_fairness
        parts.append(
            f"order swap: {c.n} pairs, consistent {c.consistent}, first_both {c.first_both}, "
            f"second_both {c.second_both}, one_tie {c.one_tie}, invalid {c.invalid}; "
            f"first position wins {_pct(f.rate)} of flipped pairs (p {f.p:.3g}), "
            f"{_pct(v.rate)} of verdicts (p {v.p:.3g}); position consistency {_pct(pc.rate)}, "
            f"preference fairness {'n/a' if pf.value is None else format(pf.value, '+.3f')}"
        )
    r = section.randomized
    if r is not None:
        parts.append(
            f"randomized order: first shown wins {r.first_wins}/{r.decisive} decisive verdicts "
            f"({_pct(r.rate)}, p {r.p_value:.3g})"
        )
    return " | ".join(parts) or "order swap: no pairwise verdicts"


def length_metrics(section: LengthSection) -> dict[str, float]:
    """``length.longer_wins.{chars,words}.{decisive_unequal,longer_won,rate,ci_low,ci_high,p}`` and
    ``length.win_rate.<model>.{raw,length_controlled}``."""
    out: dict[str, float] = {}
    for unit, r in section.longer_wins.items():
        prefix = f"length.longer_wins.{unit}"
        out |= metrics_under(prefix, decisive_unequal=r.decisive_unequal, longer_won=r.longer_won)
        out |= r.metrics(prefix)
    for model, m in section.length_controlled.models.items():
        out |= metrics_under(
            f"length.win_rate.{metric_safe(model)}", raw=m.win_rate, length_controlled=m.length_controlled
        )
    return out


def length_summary(section: LengthSection) -> str:
    c = section.longer_wins["chars"]
    return (
        f"length: the longer answer wins {c.longer_won}/{c.decisive_unequal} decisive verdicts "
        f"({_pct(c.rate)}, p {c.p_value:.3g})"
    )


@dataclass(frozen=True)
class TableRow:
    """A row of the report's position tables: one group of pairs and its readings (``block``)."""

    group: str
    name: str
    block: PairBlock


def table(section: OrderSwap) -> list[TableRow]:
    """One row per group of pairs: overall first, then each judge prompt, turn and model pair."""
    rows = [TableRow("overall", "all pairs", section)]
    for _, label, blocks in section.groups():
        rows += [TableRow(label, name, b) for name, b in blocks.items()]
    return rows


def plot_rows(section: OrderSwap) -> list[dict[str, Any]]:
    """Figure data for ``dvc plots``: each group's counts and both first-position win rates."""
    out = []
    for r in table(section):
        f, v = r.block.flipped, r.block.per_verdict
        out.append(
            {
                "group": r.group,
                "name": r.name,
                **{k: getattr(r.block.counts, k) for k in COUNT_KEYS},
                "flipped_first_rate": f.rate if f.rate is not None else "",
                "flipped_ci_low": f.ci.low,
                "flipped_ci_high": f.ci.high,
                "flipped_p": f.p,
                "first_rate": v.rate if v.rate is not None else "",
                "first_ci_low": v.ci.low,
                "first_ci_high": v.ci.high,
                "first_p": v.p,
            }
        )
    return out
